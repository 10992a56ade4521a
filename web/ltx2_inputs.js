// Greys the widgets of the pack's nodes that do not apply to the run as the node is set up (the rules:
// ltx2_inputs_logic.js), e.g. the generate node's width, height, frames and fps while a retake is linked (the
// clip's are used). A greyed widget keeps its value and is still queued; it only shows that the run ignores it.
import { app } from "../../scripts/app.js";
import { RULES, unusedInputs } from "./ltx2_inputs_logic.js";

function refresh(node) {
  const values = Object.fromEntries((node.widgets ?? []).map((w) => [w.name, w.value]));
  const linked = new Set((node.inputs ?? []).filter((input) => input.link != null).map((input) => input.name));
  const unused = new Set(unusedInputs(node.comfyClass, values, linked));
  for (const widget of node.widgets ?? []) {
    if (widget.options?.serialize === false) continue;  // the node's own helper widgets
    widget.disabled = unused.has(widget.name);
  }
  node.setDirtyCanvas?.(true, true);
}

function follow(node) {
  for (const widget of node.widgets ?? []) {
    const previous = widget.callback;
    widget.callback = function (...args) {
      const result = previous?.apply(this, args);
      refresh(node);
      return result;
    };
  }
  const connected = node.onConnectionsChange;
  node.onConnectionsChange = function (...args) {
    const result = connected?.apply(this, args);
    refresh(node);
    return result;
  };
  refresh(node);
}

app.registerExtension({
  name: "ltx2.inputs",
  nodeCreated(node) {
    if (node.comfyClass in RULES) follow(node);
  },
  loadedGraphNode(node) {  // a loaded workflow's values and links arrive after the node is created
    if (node.comfyClass in RULES) refresh(node);
  },
});
