"""ComfyUI 0.26's queue-time validation of one node's widget values (execution.validate_inputs), for tests without
a server: inputs the node's VALIDATE_INPUTS names skip ComfyUI's own min / max / choice checks and get every
VALIDATE_INPUTS failure; the others get ComfyUI's checks. The e2e tests check the same against a real ComfyUI."""

from __future__ import annotations

import inspect


def comfy_errors(node: type, values: dict) -> list[tuple[str, str]]:
    """(input name, message) per error ComfyUI would report for these widget values (None: a linked input)."""
    types = node.INPUT_TYPES()
    specs = {**types.get("required", {}), **types.get("optional", {})}
    named = inspect.getfullargspec(node.VALIDATE_INPUTS).args if hasattr(node, "VALIDATE_INPUTS") else []
    errors = []
    for name, value in values.items():
        kind, options = specs[name][0], (specs[name][1] if len(specs[name]) > 1 else {})
        if value is None or name in named:
            continue
        if kind == "INT":
            value = int(value)
        elif kind == "FLOAT":
            value = float(value)
        if "min" in options and value < options["min"]:
            errors.append((name, f"Value {value} smaller than min of {options['min']}"))
        elif "max" in options and value > options["max"]:
            errors.append((name, f"Value {value} bigger than max of {options['max']}"))
        elif isinstance(kind, list) and value not in kind:
            errors.append((name, "Value not in list"))
    filtered = {name: values[name] for name in values if name in named}
    if filtered:
        result = node.VALIDATE_INPUTS(**filtered)
        if result is not True:
            errors += [(name, f"{name} - {result}") for name in filtered]
    return errors
