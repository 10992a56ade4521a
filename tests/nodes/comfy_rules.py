"""ComfyUI 0.26's queue-time validation of one node's widget values (execution.validate_inputs), for tests without
a server: inputs the node's VALIDATE_INPUTS names skip ComfyUI's own min / max / choice checks and get every
VALIDATE_INPUTS failure; the others get ComfyUI's checks. A validator that takes `input_types` gets the linked
inputs' types and is listed with the others (ComfyUI then leaves the links' types to it). The e2e tests check the
same against a real ComfyUI."""

from __future__ import annotations

import inspect


def comfy_errors(node: type, values: dict, links: dict | None = None) -> list[tuple[str, str]]:
    """(input name, message) per error ComfyUI would report for these widget values (None: a linked input) and
    `links` (input name -> the type of the output linked to it)."""
    types = node.INPUT_TYPES()
    specs = {**types.get("required", {}), **types.get("optional", {})}
    named = inspect.getfullargspec(node.VALIDATE_INPUTS).args if hasattr(node, "VALIDATE_INPUTS") else []
    links = links or {}
    errors = []
    for name, value in values.items():
        kind, options = specs[name][0], (specs[name][1] if len(specs[name]) > 1 else {})
        if name in links or name in named or (value is None and not isinstance(kind, list)):
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
    filtered = {name: values.get(name) for name in {**values, **links} if name in named}
    if "input_types" in named:
        filtered["input_types"] = dict(links)
    if filtered:
        result = node.VALIDATE_INPUTS(**filtered)
        if result is not True:
            errors += [(name, f"{name} - {result}") for name in filtered]
    return errors


def at_fault(errors: list[tuple[str, str]]) -> str:
    """The input a problem is reported on: ComfyUI's own check names one input; a VALIDATE_INPUTS failure is listed
    on every input the validator names, each with the same message, which begins with the input at fault."""
    if len(errors) == 1 and " - " not in errors[0][1]:
        return errors[0][0]
    messages = {message.split(" - ", 1)[1] for _, message in errors}
    assert len(messages) == 1, errors
    return messages.pop().split(":", 1)[0]
