"""Writes each node's help page, web/docs/<node id>.md, from what the node itself states: its display name,
DESCRIPTION, category, and the tooltips of its inputs and outputs. The same pages every run.

    python tools/make_node_docs.py        # after changing a node's description or tooltips

ComfyUI's frontend (1.45, with ComfyUI 0.26) shows a custom node's help page in the node library's info panel: it
fetches /extensions/<pack folder>/docs/<node id>/<locale>.md, then /extensions/<pack folder>/docs/<node id>.md, and
ComfyUI serves /extensions/<pack folder>/ from the pack's WEB_DIRECTORY (web/). Without a page it shows the
DESCRIPTION alone. tests/unit/test_package_metadata.py checks the committed pages equal these.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "web" / "docs"


def _cell(text: object) -> str:
    """`text` as one Markdown table cell (no line breaks, pipes escaped)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(entry: tuple) -> str:
    kind = entry[0]
    return "choice" if isinstance(kind, (list, tuple)) else str(kind)


def page(node_id: str, cls: type, display_name: str, readme_url: str) -> str:
    """The help page of the node class `cls` registered as `node_id` (Markdown)."""
    spec = cls.INPUT_TYPES()
    lines = [f"# {display_name}", "", " ".join(cls.DESCRIPTION.split()), "",
             f"Node id `{node_id}`, in the node menu under **{cls.CATEGORY}**.", "", "## Inputs", "",
             "| input | type | what it is |", "|---|---|---|"]
    for section in ("required", "optional"):
        for name, entry in spec.get(section, {}).items():
            label = f"`{name}`" + (" (optional)" if section == "optional" else "")
            lines.append(f"| {label} | `{_type(entry)}` | {_cell(entry[1].get('tooltip', ''))} |")
    names = getattr(cls, "RETURN_NAMES", None) or tuple(t.lower() for t in cls.RETURN_TYPES)
    tips = getattr(cls, "OUTPUT_TOOLTIPS", None) or ("",) * len(cls.RETURN_TYPES)
    lines += ["", "## Outputs", "", "| output | type | what it is |", "|---|---|---|"]
    lines += [f"| `{name}` | `{kind}` | {_cell(tip)} |" for name, kind, tip in zip(names, cls.RETURN_TYPES, tips)]
    lines += ["", f"The pack's README has the model files, the example workflows, memory and multi-GPU: {readme_url}",
              ""]
    return "\n".join(lines)


def readme_url(root: Path = ROOT) -> str:
    """The Documentation address of the package metadata (pyproject.toml)."""
    with open(root / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["urls"]["Documentation"]


def pages(mappings: dict[str, type], display_names: dict[str, str], root: Path = ROOT) -> dict[str, str]:
    """File name -> help page, for every node of `mappings` (NODE_CLASS_MAPPINGS)."""
    url = readme_url(root)
    return {f"{node_id}.md": page(node_id, cls, display_names[node_id], url) for node_id, cls in mappings.items()}


@contextlib.contextmanager
def _atomic(path: Path):
    """A temporary file beside `path`, renamed onto it only when the block finishes."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(handle)
    try:
        yield Path(temporary)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

    FOLDER.mkdir(parents=True, exist_ok=True)
    written = pages(NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS)
    for name, text in written.items():
        with _atomic(FOLDER / name) as temporary:
            temporary.write_text(text, encoding="utf-8")
    for stale in sorted({p.name for p in FOLDER.glob("*.md")} - set(written)):
        (FOLDER / stale).unlink()  # a page of a node the pack no longer registers
    print(f"{len(written)} help pages in {FOLDER.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
