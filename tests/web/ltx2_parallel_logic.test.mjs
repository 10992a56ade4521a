// node --test: the parallelism widget's pure logic (web/ltx2_parallel_logic.js)
import assert from "node:assert/strict";
import test from "node:test";

import {
  ATTACHED_MAX, CPU_WORKERS_MAX, axisChoices, defaultLayout, deviceBound, fastestPredicted, formatLayout,
  layoutProblems, layoutRows, layoutRowsText, layoutsOf, memoryWarnings, parseLayout, predictedText,
  weightBytesPerGpu, weightsLabel, weightsText, workerMode,
} from "../../web/ltx2_parallel_logic.js";

const GB = 2 ** 30;

test("a valid layout has no problem; each invalid one names its fault", () => {
  assert.deepEqual(layoutProblems({ cfg: 2, sp: 2, tp: 1 }, { devices: 4, passes: 4 }), []);
  assert.match(layoutProblems({ cfg: 2, sp: 2, tp: 1 }, { devices: 2 })[0], /4 GPUs needed, 2 visible/);
  assert.match(layoutProblems({ cfg: 1, sp: 3, tp: 1 }, { devices: 4 })[0], /tp·sp = 3 must divide/);
  assert.match(layoutProblems({ cfg: 2, sp: 1, tp: 1 }, { devices: 2, passes: 1 })[0], /exceeds the 1 guidance/);
});

test("choices on an axis leave out the invalid degrees", () => {
  const choices = axisChoices({ cfg: 2, sp: 1, tp: 1 }, "sp", { devices: 4, passes: 4 });
  assert.deepEqual(choices.map((c) => [c.degree, c.valid]), [[1, true], [2, true], [3, false], [4, false]]);
});

test("cfg 3 is offered where it runs (three guidance passes on three devices)", () => {
  const valid = (facts) => axisChoices({ cfg: 1, sp: 1, tp: 1 }, "cfg", facts).filter((c) => c.valid)
    .map((c) => c.degree);
  assert.deepEqual(valid({ devices: 4, passes: 4 }), [1, 2, 3, 4]);
  assert.deepEqual(valid({ devices: 8, passes: 3 }), [1, 2, 3]);
  assert.deepEqual(layoutProblems({ cfg: 3, sp: 1, tp: 1 }, { devices: 3, passes: 4 }), []);
});

test("the default layout: CFG first, then Ulysses, tensor parallel only to fit (as ltx2_core.parallel)", () => {
  const cases = [
    [{ devices: 2, passes: 4, weightBytes: 37 * GB, freeBytes: 80 * GB }, { cfg: 2, sp: 1, tp: 1 }],
    [{ devices: 8, passes: 4, weightBytes: 37 * GB, freeBytes: 80 * GB }, { cfg: 4, sp: 2, tp: 1 }],
    [{ devices: 4, passes: 1, weightBytes: 37 * GB, freeBytes: 80 * GB }, { cfg: 1, sp: 4, tp: 1 }],
    [{ devices: 2, passes: 4, weightBytes: 37 * GB, freeBytes: 24 * GB }, { cfg: 1, sp: 1, tp: 2 }],
    [{ devices: 8, passes: 4, weightBytes: 44 * GB, freeBytes: 24 * GB }, { cfg: 2, sp: 1, tp: 4 }],
  ];
  for (const [facts, expected] of cases) assert.deepEqual(defaultLayout(facts), expected);
});

test("weights per GPU, and the widget value round trip", () => {
  assert.equal(weightBytesPerGpu(44, { cfg: 2, sp: 2, tp: 2 }), 22);
  const layout = { cfg: 2, sp: 1, tp: 2 };
  assert.deepEqual(parseLayout(formatLayout(layout)), layout);
  assert.deepEqual(parseLayout("not json"), { cfg: 1, sp: 1, tp: 1 });
});

test("workers attached through torchrun lift this machine's GPU count as the bound", () => {
  assert.equal(deviceBound(2, ""), 2);
  assert.equal(deviceBound(2, "  "), 2);
  assert.equal(deviceBound(2, "gpu-box:29600"), ATTACHED_MAX);
  const facts = { devices: deviceBound(1, "gpu-box:29600"), passes: 4 };
  assert.deepEqual(layoutProblems({ cfg: 2, sp: 4, tp: 1 }, facts), []); // 8 remote GPUs from a 1-GPU machine
});

test("without a GPU the layout runs as CPU workers, at most CPU_WORKERS_MAX (the server's bound)", () => {
  assert.equal(CPU_WORKERS_MAX, 4);
  assert.equal(workerMode(0, ""), "cpu");
  assert.equal(workerMode(2, ""), "gpu");
  assert.equal(workerMode(0, "gpu-box:29600"), "attached");
  const facts = { devices: deviceBound(0, ""), passes: 4, mode: workerMode(0, "") };
  assert.deepEqual(layoutProblems({ cfg: 2, sp: 1, tp: 1 }, facts), []); // the two-GPU example runs on CPU workers
  assert.deepEqual(axisChoices({ cfg: 1, sp: 1, tp: 1 }, "sp", facts).filter((c) => c.valid).map((c) => c.degree),
    [1, 2, 4]);
  assert.match(layoutProblems({ cfg: 2, sp: 4, tp: 1 }, facts)[0], /8 CPU workers, at most 4 without a GPU/);
});

test("on CPU workers the default layout is one worker, and the weights row counts the RAM they hold", () => {
  // CPU workers share the cores (no faster) and each holds the weights: the default starts one, not four
  const facts = { devices: deviceBound(0, ""), passes: 4, mode: workerMode(0, ""), weightBytes: 38e9,
    freeBytes: Infinity };
  assert.deepEqual(defaultLayout(facts), { cfg: 1, sp: 1, tp: 1 });
  assert.deepEqual(defaultLayout({ ...facts, mode: "gpu" }), { cfg: 4, sp: 1, tp: 1 }); // four GPUs: CFG over them
  assert.equal(weightsLabel("gpu"), "weights per GPU");
  assert.equal(weightsLabel("cpu"), "weights per CPU worker (in RAM)");
  assert.equal(weightsLabel("attached"), "weights per worker");
  const models = { "LTX-2 19B": 37.75e9 };
  assert.equal(weightsText({ cfg: 1, sp: 1, tp: 1 }, "gpu", models), "LTX-2 19B 37.8 GB");  // one GPU decodes here
  // several workers also keep the video decoder they decode the tiles with, whole on each (tp does not divide it)
  assert.equal(weightsText({ cfg: 2, sp: 1, tp: 1 }, "gpu", models), "LTX-2 19B 37.8 GB + video decoder 0.8 GB");
  assert.equal(weightsText({ cfg: 1, sp: 1, tp: 2 }, "gpu", models), "LTX-2 19B 18.9 GB + video decoder 0.8 GB");
  assert.equal(weightsText({ cfg: 2, sp: 1, tp: 1 }, "cpu", models),
    "LTX-2 19B 37.8 GB + video decoder 0.8 GB; 2 worker(s) hold about 76 GB of RAM together");
});

test("the server states the same bounds (nodes/parallel.py)", async () => {
  const { readFile } = await import("node:fs/promises");
  const python = await readFile(new URL("../../nodes/parallel.py", import.meta.url), "utf8");
  assert.match(python, new RegExp(`^MAX_CPU_WORKERS = ${CPU_WORKERS_MAX}\\b`, "m"));
  assert.match(python, new RegExp(`^ATTACHED_MAX = ${ATTACHED_MAX}\\b`, "m"));
});

test("a warning when the weights per GPU exceed the smallest GPU's memory", () => {
  const gpus = [{ name: "RTX 4090", total: 24e9 }, { name: "H100", total: 80e9 }];
  const models = { "LTX-2.3 22B": 44e9 };
  assert.match(memoryWarnings({ cfg: 2, sp: 1, tp: 1 }, gpus, models)[0],
    /LTX-2.3 22B: 44.0 GB of weights per GPU exceed the 24 GB of RTX 4090; raise tp/);
  assert.deepEqual(memoryWarnings({ cfg: 1, sp: 1, tp: 2 }, gpus, models), []);
  assert.deepEqual(memoryWarnings({ cfg: 1, sp: 1, tp: 1 }, [], models), []);
});

// the shape of GET /ltx2/layout_times (nodes/parallel.py layout_times)
const PREDICTED = {
  gpu: "H200", link: "nvlink4", run: "two-stage 768×512×121",
  seconds: { "1,1,1,4": 16.0, "2,1,1,4": 10.8, "1,2,1,4": 11.0, "1,1,2,4": 13.5, "4,1,1,4": 9.4, "2,2,1,4": 9.3,
    "1,1,4,4": 17.3, "2,1,2,4": 9.3, "1,1,1,1": 6.0, "1,2,1,1": 5.0 },
};

test("the fastest predicted layout: of exactly that many GPUs, tp at least the memory's, ties to less tp", () => {
  assert.deepEqual(fastestPredicted(PREDICTED, 2, 4), { cfg: 2, sp: 1, tp: 1 });
  assert.deepEqual(fastestPredicted(PREDICTED, 4, 4), { cfg: 2, sp: 2, tp: 1 }); // 9.3 s twice: the lower tp
  assert.deepEqual(fastestPredicted(PREDICTED, 4, 4, 2), { cfg: 2, sp: 1, tp: 2 }); // the weights need tp 2
  assert.deepEqual(fastestPredicted(PREDICTED, 2, 1), { cfg: 1, sp: 2, tp: 1 });
  assert.equal(fastestPredicted(PREDICTED, 8, 4), null);
  assert.equal(fastestPredicted(null, 2, 4), null);
});

test("the predicted row: this layout's time, the fastest of as many GPUs, and that it is a prediction", () => {
  const text = predictedText({ cfg: 1, sp: 2, tp: 1 }, 4, PREDICTED);
  assert.match(text, /^11\.0 s, two-stage 768×512×121 on H200 over nvlink4 \(fastest: cfg 2 × sp 1 × tp 1 10\.8 s;/);
  assert.match(text, /a prediction, not a measurement/);
  assert.match(predictedText({ cfg: 2, sp: 1, tp: 1 }, 4, PREDICTED), /10\.8 s.*the fastest of 2 GPU\(s\)/);
  assert.equal(predictedText({ cfg: 1, sp: 1, tp: 8 }, 4, PREDICTED), "none for this layout");
  assert.equal(predictedText({ cfg: 1, sp: 1, tp: 1 }, 4, null), "none for this layout");
  assert.match(predictedText({ cfg: 1, sp: 1, tp: 1 }, 4, PREDICTED, "cpu"), /none for CPU workers/);
});

test("every valid layout of as many GPUs with its time and weights per GPU, fastest first, the chosen marked", () => {
  const facts = { heads: [32, 32], passes: 4, mode: "gpu" };
  assert.deepEqual(layoutsOf(4, facts).map((l) => [l.cfg, l.sp, l.tp]),
    [[1, 1, 4], [1, 2, 2], [1, 4, 1], [2, 1, 2], [2, 2, 1], [4, 1, 1]]);
  assert.deepEqual(layoutsOf(3, { ...facts, heads: [4, 4] }).map((l) => [l.cfg, l.sp, l.tp]), [[3, 1, 1]]);
  const rows = layoutRows({ cfg: 4, sp: 1, tp: 1 }, facts, PREDICTED, 40e9);
  // 9.3 s twice: the lower tp first; cfg 1 × sp 2 × tp 2 and cfg 1 × sp 4 have no prediction here: last
  assert.deepEqual(rows.map((r) => [r.layout.cfg, r.layout.sp, r.layout.tp, r.seconds, r.weights, r.chosen]), [
    [2, 2, 1, 9.3, 40e9, false], [2, 1, 2, 9.3, 20e9, false], [4, 1, 1, 9.4, 40e9, true],
    [1, 1, 4, 17.3, 10e9, false], [1, 4, 1, null, 40e9, false], [1, 2, 2, null, 20e9, false]]);
  const lines = layoutRowsText(rows);
  assert.equal(lines[0], "   cfg 2 × sp 2 × tp 1: 9.3 s, 40.0 GB per GPU");
  assert.equal(lines[2], "▶ cfg 4 × sp 1 × tp 1: 9.4 s, 40.0 GB per GPU");
  assert.equal(lines[5], "   cfg 1 × sp 2 × tp 2: –, 20.0 GB per GPU");
  // the guidance passes pick the predictions: with one pass, cfg 2 is not valid and sp 2 leads
  assert.deepEqual(layoutRows({ cfg: 1, sp: 1, tp: 2 }, { ...facts, passes: 1 }, PREDICTED, 40e9)
    .map((r) => [r.layout.sp, r.layout.tp, r.seconds]), [[2, 1, 5.0], [1, 2, null]]);
  assert.deepEqual(layoutRows({ cfg: 1, sp: 1, tp: 1 }, facts, null, 40e9).map((r) => r.seconds), [null]);
});
