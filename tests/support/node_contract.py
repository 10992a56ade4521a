"""What every node class of the pack must satisfy to load in ComfyUI (V1 API) and to read well in its UI."""

from __future__ import annotations

INPUT_SECTIONS = ("required", "optional", "hidden")


def node_problems(node_id: str, cls: type) -> list[str]:
    """Every way `cls`, registered as `node_id`, breaks the pack's node conventions (empty when none)."""
    problems = []
    if not node_id.startswith("LTX2"):
        problems.append(f"{node_id}: the id lacks the LTX2 prefix")
    if not str(getattr(cls, "CATEGORY", "")).startswith("LTX-2/"):
        problems.append(f"{node_id}: CATEGORY {getattr(cls, 'CATEGORY', None)!r} is not under 'LTX-2/'")
    function = getattr(cls, "FUNCTION", None)
    if not isinstance(function, str) or not callable(getattr(cls, function, None)):
        problems.append(f"{node_id}: FUNCTION {function!r} names no method")
    returns = getattr(cls, "RETURN_TYPES", None)
    if not isinstance(returns, tuple) or not all(isinstance(r, str) for r in returns):
        problems.append(f"{node_id}: RETURN_TYPES must be a tuple of type names, got {returns!r}")
    names = getattr(cls, "RETURN_NAMES", None)
    if names is not None and (not isinstance(returns, tuple) or len(names) != len(returns)):
        problems.append(f"{node_id}: RETURN_NAMES {names!r} do not match RETURN_TYPES {returns!r}")
    return problems + _input_problems(node_id, cls)


def _input_problems(node_id: str, cls: type) -> list[str]:
    input_types = getattr(cls, "INPUT_TYPES", None)
    spec = input_types() if callable(input_types) else None
    if not isinstance(spec, dict) or "required" not in spec or set(spec) - set(INPUT_SECTIONS):
        return [f"{node_id}: INPUT_TYPES() must return a dict with 'required' (and 'optional'/'hidden'), got {spec!r}"]
    problems = []
    for section in ("required", "optional"):
        for name, entry in spec.get(section, {}).items():
            if not isinstance(entry, tuple) or not entry:
                problems.append(f"{node_id}.{name}: the input spec must be a (type, options) tuple, got {entry!r}")
            elif len(entry) < 2 or not isinstance(entry[1], dict) or not entry[1].get("tooltip"):
                problems.append(f"{node_id}.{name}: the input has no tooltip")
    return problems
