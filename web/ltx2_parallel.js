// The LTX2ParallelConfig node's widget: the detected devices, cfg / sp / tp choices with invalid ones left out,
// the default layout (the fastest the cost model predicts among those whose weights fit), the weight memory per
// worker (read-only rows; a warning when it exceeds a GPU's memory; on CPU workers the RAM they hold together), the
// predicted end-to-end time of the layout beside it (GET /ltx2/layout_times: the Python cost model's), and every
// valid layout of as many GPUs with its predicted time and weights per GPU, fastest first, the chosen one marked.
// Without a GPU the layout runs as CPU worker processes, at most CPU_WORKERS_MAX, as the server allows. Its value
// is the node's `layout` input (a JSON string), so it reaches Python under that name, is saved with the workflow
// and appears in the API-format export.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";
import {
  CPU_WORKERS_MAX, DEFAULT_HEADS, axisChoices, defaultLayout, deviceBound, fastestPredicted, formatLayout,
  layoutProblems, layoutRows, layoutRowsText, memoryWarnings, parseLayout, predictedText, weightsLabel, weightsText,
  workerMode,
} from "./ltx2_parallel_logic.js";

const AXES = ["cfg", "sp", "tp"];
// transformer weights in bf16, as the memory plan counts them for the released configs (tests/web/test_widget_logic.py)
const MODELS = { "LTX-2 19B": 37.75e9, "LTX-2.3 22B": 37.98e9, "LTX-2.5 22B": 37.85e9 };
const CURRENT = "LTX-2.5 22B"; // the release the default layout is sized for
const GB = 1e9;

async function listDevices() {
  try {
    return (await (await api.fetchApi("/ltx2/devices")).json()).devices ?? [];
  } catch {
    return [];
  }
}

const PREDICTED_MAX = 16; // the most GPUs the predictions cover (nodes/parallel.py PREDICTED_MAX)

// the cost model's predicted seconds per layout for these GPUs (null without a GPU or when the route fails)
async function listTimes(devices) {
  if (!devices.length) return null;
  const query = `gpus=${PREDICTED_MAX}&name=${encodeURIComponent(devices[0].name)}`;
  try {
    return await (await api.fetchApi(`/ltx2/layout_times?${query}`)).json();
  } catch {
    return null;
  }
}

function describe(devices) {
  if (!devices.length) return `no GPU: the layout runs as CPU worker processes (at most ${CPU_WORKERS_MAX})`;
  return devices.map((d) => `${d.name}: ${(d.free / GB).toFixed(0)}/${(d.total / GB).toFixed(0)} GB free`).join("; ");
}

function setUp(node, devices, predicted) {
  const layoutWidget = node.widgets.find((w) => w.name === "layout");
  const passesWidget = node.widgets.find((w) => w.name === "guidance_passes");
  const attachWidget = node.widgets.find((w) => w.name === "attach");
  const facts = () => ({ devices: deviceBound(devices.length, attachWidget?.value), passes: passesWidget?.value ?? 4,
    heads: DEFAULT_HEADS, mode: workerMode(devices.length, attachWidget?.value) });
  const info = (name, value) => readOnlyRow(node, name, value);
  info("devices_found", describe(devices));
  const memory = info("weights", "");
  const timing = info("predicted_end_to_end", "");
  const table = info("layouts_by_time", []); // every layout of as many GPUs: its time and weights per GPU
  const combos = {};
  const refresh = () => {
    const layout = parseLayout(layoutWidget.value);
    for (const axis of AXES) {
      combos[axis].options.values = axisChoices(layout, axis, facts()).filter((c) => c.valid).map((c) => String(c.degree));
      combos[axis].value = String(layout[axis]);
    }
    const problems = layoutProblems(layout, facts());
    const { mode } = facts();
    const weights = weightsText(layout, mode, MODELS);
    const warnings = mode === "gpu" ? memoryWarnings(layout, devices, MODELS) : [];
    memory.label = weightsLabel(mode);
    memory.value = problems.length ? `invalid: ${problems.join("; ")}`
      : warnings.length ? `${weights}. Warning: ${warnings.join("; ")}` : weights;
    timing.value = problems.length ? "–" : predictedText(layout, facts().passes, predicted, mode);
    table.value = problems.length || mode === "cpu" ? ["–"]
      : layoutRowsText(layoutRows(layout, facts(), predicted, MODELS[CURRENT]));
    if (node.size && node.computeSize) node.setSize?.([node.size[0], Math.max(node.size[1], node.computeSize()[1])]);
    node.setDirtyCanvas?.(true, true);
  };
  const choose = (axis, value) => {
    const layout = { ...parseLayout(layoutWidget.value), [axis]: Number(value) };
    if (layoutProblems(layout, facts()).length === 0) layoutWidget.value = formatLayout(layout);
    refresh();
  };
  for (const axis of AXES) {
    combos[axis] = node.addWidget("combo", `${axis}_degree`, "1", (value) => choose(axis, value),
      { values: ["1"], serialize: false });
  }
  node.addWidget("button", "default layout", null, () => {
    const free = devices.length ? Math.min(...devices.map((d) => d.free)) : 0;
    const rule = defaultLayout({ ...facts(), weightBytes: MODELS[CURRENT], freeBytes: free || Infinity });
    const { mode, passes } = facts();
    const world = mode === "gpu" && predicted && !predicted.assumed ? devices.length : 0; // as the pack's auto
    layoutWidget.value = formatLayout((world && fastestPredicted(predicted, world, passes, rule.tp)) || rule);
    refresh();
  }, { serialize: false });
  for (const widget of [passesWidget, attachWidget]) {
    if (!widget) continue;
    const previous = widget.callback;
    widget.callback = (...args) => { previous?.apply(widget, args); refresh(); };
  }
  refresh();
}

// an information row: drawn as a label and its text (a list value: the label, then one line per entry), not editable
// (no click handling), not saved or queued
function readOnlyRow(node, name, value) {
  const row = {
    name, type: "ltx2_info", value, options: { serialize: false, read_only: true }, serialize: false,
    draw(ctx, _node, width, y, height) {
      ctx.save();
      ctx.fillStyle = window.LiteGraph?.WIDGET_SECONDARY_TEXT_COLOR ?? "#999";
      ctx.font = "11px sans-serif";
      ctx.textAlign = "left";
      const label = this.label ?? name.replace(/_/g, " ");
      if (Array.isArray(this.value)) {
        ctx.fillText(`${label}:`, 15, y + 14, width - 30);
        this.value.forEach((line, i) => ctx.fillText(line, 25, y + 30 + 16 * i, width - 40));
      } else {
        ctx.fillText(`${label}: ${this.value}`, 15, y + height * 0.7, width - 30);
      }
      ctx.restore();
    },
    computeSize(width) {
      return [width, Array.isArray(this.value) ? 20 + 16 * this.value.length : 20];
    },
  };
  return node.addCustomWidget(row);
}

app.registerExtension({
  name: "ltx2.parallel",
  async nodeCreated(node) {
    if (node.comfyClass !== "LTX2ParallelConfig") return;
    const devices = await listDevices();
    setUp(node, devices, await listTimes(devices));
  },
});
