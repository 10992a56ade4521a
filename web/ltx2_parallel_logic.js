// The parallelism widget's logic, as pure functions (no DOM, no ComfyUI): which cfg × sp × tp layouts are valid
// for the visible devices, the model's heads and the run's guidance passes; the default layout; the weight memory
// per GPU and whether it fits. The same rules as ltx2_core.parallel (ParallelConfig.check, default_layout) and the
// same worker bounds as nodes/parallel.py (the server refuses what the widget leaves out). Tested with `node --test`.

export const HEADROOM = 0.8; // of a device's free memory the weights may take
export const DEFAULT_HEADS = [32, 32]; // video and audio attention heads of the released models
export const DEFAULT_LAYOUT = { cfg: 1, sp: 1, tp: 1 };

export const ATTACHED_MAX = 64; // the GPUs offered when torchrun launches the workers (possibly on other machines)
export const CPU_WORKERS_MAX = 4; // without a GPU the layout runs as CPU worker processes sharing the cores

// where the workers run: "attached" (torchrun's, to `attach` = HOST:PORT), "gpu" (one per local GPU) or "cpu"
export function workerMode(localDevices, attach) {
  if (typeof attach === "string" && attach.trim()) return "attached";
  return localDevices > 0 ? "gpu" : "cpu";
}

// how many workers a layout may use: this machine's GPUs, CPU_WORKERS_MAX without one, ATTACHED_MAX attached
export function deviceBound(localDevices, attach) {
  const mode = workerMode(localDevices, attach);
  return mode === "attached" ? ATTACHED_MAX : mode === "gpu" ? localDevices : CPU_WORKERS_MAX;
}

const TOO_MANY = {
  gpu: (world, bound) => `${world} GPUs needed, ${bound} visible`,
  cpu: (world, bound) => `${world} CPU workers, at most ${bound} without a GPU`,
  attached: (world, bound) => `${world} workers, at most ${bound} can attach`,
};

const divides = (degree, heads) => heads.every((count) => count % degree === 0);

// every problem of a layout, as messages naming the fix ([] when valid)
export function layoutProblems(layout, { devices, heads = DEFAULT_HEADS, passes = 4, mode = "gpu" }) {
  const problems = [];
  const { cfg, sp, tp } = layout;
  if (![cfg, sp, tp].every((d) => Number.isInteger(d) && d >= 1)) return ["degrees must be integers ≥ 1"];
  const world = cfg * sp * tp;
  if (devices !== undefined && world > devices) problems.push(TOO_MANY[mode](world, devices));
  if (!divides(tp * sp, heads)) problems.push(`tp·sp = ${tp * sp} must divide the ${heads.join("/")} heads`);
  if (cfg > passes) problems.push(`cfg ${cfg} exceeds the ${passes} guidance passes`);
  return problems;
}

// the degrees one axis may take when the other two are fixed, each with whether it is valid: every degree up to
// the device bound (cfg 3 runs with 3 or more devices; sp and tp 3 do not divide the heads and come out invalid)
export function axisChoices(layout, axis, facts) {
  const choices = [];
  for (let degree = 1; degree <= Math.max(facts.devices ?? 1, 1); degree += 1) {
    const candidate = { ...layout, [axis]: degree };
    choices.push({ degree, valid: layoutProblems(candidate, facts).length === 0 });
  }
  return choices;
}

// tensor parallel only as far as the weights must shrink to fit, then CFG over the passes, the rest Ulysses; on CPU
// workers one worker: they share this machine's cores (no faster) and each holds the weights in its RAM
export function defaultLayout({ devices, passes = 4, weightBytes, freeBytes, heads = DEFAULT_HEADS, mode = "gpu" }) {
  if (mode === "cpu") return { ...DEFAULT_LAYOUT };
  let tp = 1;
  while (weightBytes / tp > HEADROOM * freeBytes && devices % (tp * 2) === 0 && divides(tp * 2, heads)) tp *= 2;
  const remaining = Math.floor(devices / tp);
  let cfg = 1;
  for (let d = 1; d <= Math.min(passes, remaining); d++) if (remaining % d === 0) cfg = d;
  let sp = Math.floor(remaining / cfg);
  while (sp > 1 && !divides(tp * sp, heads)) sp -= 1;
  return { cfg, sp, tp };
}

// the transformer's weight bytes each GPU holds: tensor parallelism divides them, the other axes replicate
export function weightBytesPerGpu(weightBytes, layout) {
  return weightBytes / layout.tp;
}

const HOLDER = { gpu: "GPU", cpu: "CPU worker (in RAM)", attached: "worker" };

// the weights row's label: what each worker is where the workers run
export const weightsLabel = (mode) => `weights per ${HOLDER[mode] ?? HOLDER.gpu}`;

// the video decoder each of several workers keeps once it has decoded the video's tiles there (the convolutional one
// in bf16; LTX-2.5's diffusion decoder about 0.2 GB): every worker holds it whole, tp does not divide it
export const DECODER_BYTES = 0.8e9;

// the weights row's text: each model's weight bytes per worker (with several workers, plus the video decoder they
// decode with), and on CPU workers the RAM they take together
export function weightsText(layout, mode, models) {
  const perWorker = Object.entries(models)
    .map(([name, bytes]) => `${name} ${(weightBytesPerGpu(bytes, layout) / 1e9).toFixed(1)} GB`).join(", ")
    + (layout.cfg * layout.sp * layout.tp > 1 ? ` + video decoder ${(DECODER_BYTES / 1e9).toFixed(1)} GB` : "");
  if (mode !== "cpu") return perWorker;
  const workers = layout.cfg * layout.sp * layout.tp;
  const most = Math.max(...Object.values(models));
  return `${perWorker}; ${workers} worker(s) hold about ${(workers * weightBytesPerGpu(most, layout) / 1e9).toFixed(0)} `
    + "GB of RAM together";
}

// a warning per model whose weights per GPU exceed the smallest GPU's memory ([] when they fit, or without GPUs)
export function memoryWarnings(layout, devices, models) {
  if (!devices.length) return [];
  const smallest = devices.reduce((a, b) => (b.total < a.total ? b : a));
  return Object.entries(models)
    .filter(([, bytes]) => weightBytesPerGpu(bytes, layout) > smallest.total)
    .map(([name, bytes]) => `${name}: ${(weightBytesPerGpu(bytes, layout) / 1e9).toFixed(1)} GB of weights per GPU `
      + `exceed the ${(smallest.total / 1e9).toFixed(0)} GB of ${smallest.name}; raise tp`);
}

// the widget's value (a JSON string) as a layout, falling back to one GPU for anything unreadable
export function parseLayout(text) {
  try {
    const value = JSON.parse(text);
    return { cfg: value.cfg ?? 1, sp: value.sp ?? 1, tp: value.tp ?? 1 };
  } catch {
    return { ...DEFAULT_LAYOUT };
  }
}

export const formatLayout = (layout) => JSON.stringify({ cfg: layout.cfg, sp: layout.sp, tp: layout.tp });

// the predicted times of GET /ltx2/layout_times ({gpu, assumed, link, run, seconds: {"cfg,sp,tp,passes": s}}) as
// entries [layout, passes, seconds]
function predictedEntries(predicted) {
  return Object.entries(predicted?.seconds ?? {}).map(([key, seconds]) => {
    const [cfg, sp, tp, passes] = key.split(",").map(Number);
    return [{ cfg, sp, tp }, passes, seconds];
  });
}

const workers = (layout) => layout.cfg * layout.sp * layout.tp;
const sameLayout = (a, b) => a.cfg === b.cfg && a.sp === b.sp && a.tp === b.tp;
const layoutName = (l) => `cfg ${l.cfg} × sp ${l.sp} × tp ${l.tp}`;

// the fastest predicted layout of exactly `devices` GPUs for `passes`, with tp ≥ minTp (the weights must fit), as
// the pack's auto layout picks (ltx2_core.parallel.choose.fastest_layout: ties to the lower tp, then the higher
// cfg); null without a prediction
export function fastestPredicted(predicted, devices, passes, minTp = 1) {
  const options = predictedEntries(predicted)
    .filter(([layout, p]) => p === passes && workers(layout) === devices && layout.tp >= minTp);
  if (!options.length) return null;
  options.sort((a, b) => a[2] - b[2] || a[0].tp - b[0].tp || b[0].cfg - a[0].cfg);
  return options[0][0];
}

// the predicted row's text: this layout's predicted end-to-end time, and the fastest layout of as many GPUs
export function predictedText(layout, passes, predicted, mode = "gpu") {
  if (mode === "cpu") return "none for CPU workers (the model covers H100, H200 and B200 GPUs)";
  const entries = predictedEntries(predicted);
  const mine = entries.find(([l, p]) => p === passes && sameLayout(l, layout));
  if (!mine) return "none for this layout";
  const best = fastestPredicted(predicted, workers(layout), passes);
  const fastest = sameLayout(best, layout) ? `the fastest of ${workers(layout)} GPU(s)`
    : `fastest: ${layoutName(best)} ${entries.find(([l, p]) => p === passes && sameLayout(l, best))[2].toFixed(1)} s`;
  const gpu = `${predicted.gpu}${predicted.assumed ? " (assumed)" : ""}`;
  return `${mine[2].toFixed(1)} s, ${predicted.run} on ${gpu} over ${predicted.link} (${fastest}; `
    + "a prediction, not a measurement)";
}

// every valid layout of exactly `count` workers (cfg × sp × tp = count) under `facts` (heads, passes, mode)
export function layoutsOf(count, facts) {
  const found = [];
  for (let cfg = 1; cfg <= count; cfg++) {
    for (let sp = 1; cfg * sp <= count; sp++) {
      const tp = count / (cfg * sp);
      const layout = { cfg, sp, tp };
      if (Number.isInteger(tp) && layoutProblems(layout, { ...facts, devices: count }).length === 0) found.push(layout);
    }
  }
  return found;
}

// the layouts table: every valid layout of as many workers as `layout` with its predicted seconds (null: none) and
// its weight bytes per GPU, fastest first (those without a prediction last, then by less tp), `layout` marked chosen
export function layoutRows(layout, facts, predicted, weightBytes) {
  const seconds = (l) => predictedEntries(predicted).find(([p, n]) => n === facts.passes && sameLayout(p, l))?.[2];
  return layoutsOf(workers(layout), facts)
    .map((l) => ({ layout: l, seconds: seconds(l) ?? null, weights: weightBytesPerGpu(weightBytes, l),
      chosen: sameLayout(l, layout) }))
    .sort((a, b) => (a.seconds ?? Infinity) - (b.seconds ?? Infinity) || a.layout.tp - b.layout.tp
      || b.layout.cfg - a.layout.cfg);
}

// the table's lines: "▶ cfg 2 × sp 1 × tp 1: 10.8 s, 37.9 GB per GPU" (▶: the chosen one; "–": no prediction)
export function layoutRowsText(rows) {
  return rows.map((r) => `${r.chosen ? "▶" : "  "} ${layoutName(r.layout)}: `
    + `${r.seconds === null ? "–" : `${r.seconds.toFixed(1)} s`}, ${(r.weights / 1e9).toFixed(1)} GB per GPU`);
}
