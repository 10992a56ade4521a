// Which widgets of the pack's nodes do not apply to the run the node is set up for, as pure functions (no DOM, no
// ComfyUI); web/ltx2_inputs.js greys them. The rules are the nodes' own: a retake's clip sets the generate node's
// size, frames and rate; text to audio has no picture; only two-stage refines with the distilled LoRA; the distilled
// and refine tables have their own steps, explicit sigmas their own schedule; a retake without the clip's sound
// generates it whole. Tested with `node --test` (tests/web).

const GENERATE = (values) => [
  ...(values.mode === "one-stage" ? ["distilled_lora"] : []),
  ...(values.mode === "distilled" ? ["steps", "distilled_lora"] : []),
];

// node class -> (widget values by name, the names of the linked inputs) -> the widgets that do not apply
export const RULES = {
  LTX2Generate: (values, linked) => [
    ...(linked.has("retake") ? ["width", "height", "frames", "fps"] : []),
    ...(values.audio_only === true ? ["width", "height"] : []),
    ...GENERATE(values),
  ],
  LTX2GenerateLong: (values) => GENERATE(values),
  LTX2Sampler: (values) => [
    ...(typeof values.sigmas === "string" && values.sigmas.trim() ? ["schedule", "steps"] : []),
    ...(values.schedule !== undefined && values.schedule !== "ltx2" ? ["steps"] : []),
  ],
  LTX2Retake: (values, linked) => (linked.has("audio") ? [] : ["keep_audio"]),
};

// the widgets of a `nodeClass` node that do not apply, sorted ([] for a node without rules)
export function unusedInputs(nodeClass, values, linked = new Set()) {
  const rule = RULES[nodeClass];
  return rule ? [...new Set(rule(values, linked))].sort() : [];
}
