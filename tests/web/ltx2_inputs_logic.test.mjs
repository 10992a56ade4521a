// node --test: which widgets the pack's nodes ignore for the run as set up (web/ltx2_inputs_logic.js)
import assert from "node:assert/strict";
import test from "node:test";

import { RULES, unusedInputs } from "../../web/ltx2_inputs_logic.js";

const GENERATE = { mode: "one-stage", width: 768, height: 512, frames: 121, fps: 24, steps: 0, audio_only: false,
  distilled_lora: "none" };

test("a linked retake greys the generate node's size, frames and rate (the clip's are used)", () => {
  assert.deepEqual(unusedInputs("LTX2Generate", { ...GENERATE, mode: "distilled" }, new Set(["retake", "model"])),
    ["distilled_lora", "fps", "frames", "height", "steps", "width"]);
  assert.deepEqual(unusedInputs("LTX2Generate", GENERATE, new Set(["retake"])),
    ["distilled_lora", "fps", "frames", "height", "width"]);
});

test("each mode greys what it does not run: the distilled LoRA outside two-stage, steps of the distilled table", () => {
  assert.deepEqual(unusedInputs("LTX2Generate", GENERATE), ["distilled_lora"]);
  assert.deepEqual(unusedInputs("LTX2Generate", { ...GENERATE, mode: "two-stage" }), []);
  assert.deepEqual(unusedInputs("LTX2GenerateLong", { ...GENERATE, mode: "distilled" }), ["distilled_lora", "steps"]);
  assert.deepEqual(unusedInputs("LTX2Generate", { ...GENERATE, mode: "two-stage", audio_only: true }),
    ["height", "width"]);
});

test("the sampler greys steps for the fixed tables and the schedule for explicit sigmas", () => {
  assert.deepEqual(unusedInputs("LTX2Sampler", { schedule: "ltx2", steps: 30, sigmas: "" }), []);
  assert.deepEqual(unusedInputs("LTX2Sampler", { schedule: "distilled", steps: 30, sigmas: " " }), ["steps"]);
  assert.deepEqual(unusedInputs("LTX2Sampler", { schedule: "ltx2", steps: 30, sigmas: "1, 0.5, 0" }),
    ["schedule", "steps"]);
});

test("a retake without the clip's sound greys keep_audio (the sound is generated whole)", () => {
  assert.deepEqual(unusedInputs("LTX2Retake", { keep_audio: false }, new Set(["images"])), ["keep_audio"]);
  assert.deepEqual(unusedInputs("LTX2Retake", { keep_audio: false }, new Set(["images", "audio"])), []);
});

test("the rules name only inputs the nodes have", async () => {
  const { readFile } = await import("node:fs/promises");
  const sources = ["generate", "long_video", "sampling", "video"].map((name) =>
    readFile(new URL(`../../nodes/${name}.py`, import.meta.url), "utf8"));
  const python = (await Promise.all(sources)).join("\n");
  const all = { mode: "distilled", audio_only: true, sigmas: "1, 0", schedule: "distilled" };
  for (const node of Object.keys(RULES)) {
    assert.match(python, new RegExp(`class ${node}\\b`));
    for (const name of unusedInputs(node, all, new Set(["retake"]))) assert.match(python, new RegExp(`"${name}": \\(`));
  }
  assert.deepEqual(unusedInputs("LTX2Decode", GENERATE), []);
});
