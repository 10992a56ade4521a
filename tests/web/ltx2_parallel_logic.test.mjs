// node --test: the parallelism widget's pure logic (web/ltx2_parallel_logic.js)
import assert from "node:assert/strict";
import test from "node:test";

import {
  ATTACHED_MAX, axisChoices, defaultLayout, deviceBound, formatLayout, layoutProblems, parseLayout, weightBytesPerGpu,
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
  assert.deepEqual(choices.map((c) => [c.degree, c.valid]), [[1, true], [2, true], [4, false]]);
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
  assert.equal(deviceBound(0, undefined), 1); // a CPU-only machine still offers one device
  assert.equal(deviceBound(2, "  "), 2);
  assert.equal(deviceBound(2, "gpu-box:29600"), ATTACHED_MAX);
  const facts = { devices: deviceBound(1, "gpu-box:29600"), passes: 4 };
  assert.deepEqual(layoutProblems({ cfg: 2, sp: 4, tp: 1 }, facts), []); // 8 remote GPUs from a 1-GPU machine
});
