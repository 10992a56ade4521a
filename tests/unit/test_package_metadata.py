"""The package metadata the Comfy Registry reads (pyproject.toml, its specification at
docs.comfy.org/registry/specifications) is complete and well formed, the changelog's top entry is its version, and
every node has a description and the help page ComfyUI's frontend shows (web/docs/<node id>.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("make_node_docs", ROOT / "tools" / "make_node_docs.py")
make_node_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_node_docs)

# the registry's node id: letters, digits and single '-', '_' or '.' between them, starting with a letter, under 100
# characters; lowercase here, as registry ids are compared without case
NODE_ID = re.compile(r"[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*")
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
RAW_GITHUB = "https://raw.githubusercontent.com/"


def _metadata(root: Path = ROOT) -> dict:
    with open(root / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def registry_problems(data: dict, root: Path = ROOT) -> list[str]:
    """Every way the parsed pyproject `data` of the pack at `root` falls short of the registry's fields."""
    project, comfy = data.get("project", {}), data.get("tool", {}).get("comfy", {})
    problems = []
    name = project.get("name", "")
    if not (NODE_ID.fullmatch(name) and len(name) < 100) or "comfyui" in name:
        problems.append(f"project.name {name!r} is not a registry node id (lowercase, no 'comfyui')")
    if not SEMVER.fullmatch(project.get("version", "")):
        problems.append(f"project.version {project.get('version')!r} is not X.Y.Z")
    if not project.get("description"):
        problems.append("project.description is missing")
    license_file = project.get("license", {}).get("file") if isinstance(project.get("license"), dict) else None
    if not license_file or not (root / license_file).is_file():
        problems.append(f"project.license must be {{file = ...}} naming a file of the pack, got {project.get('license')}")
    repository = project.get("urls", {}).get("Repository", "")
    if urlparse(repository).scheme != "https" or not urlparse(repository).netloc:
        problems.append(f"project.urls.Repository {repository!r} is not an https address")
    for key in ("PublisherId", "DisplayName", "Icon", "requires-comfyui"):
        if not comfy.get(key):
            problems.append(f"tool.comfy.{key} is missing")
    if comfy.get("PublisherId") and not NODE_ID.fullmatch(comfy["PublisherId"]):
        problems.append(f"tool.comfy.PublisherId {comfy['PublisherId']!r} is not lowercase letters, digits and '-'")
    icon = comfy.get("Icon", "")
    if icon.startswith(RAW_GITHUB):  # a raw GitHub address of a file in this repository (its default branch)
        owner_repo = "/".join(urlparse(repository).path.strip("/").split("/")[:2])
        parts = icon[len(RAW_GITHUB):].split("/")
        if "/".join(parts[:2]) != owner_repo or not (root / "/".join(parts[3:])).is_file():
            problems.append(f"tool.comfy.Icon {icon!r} is not a file of {repository}")
    elif icon and urlparse(icon).scheme != "https":
        problems.append(f"tool.comfy.Icon {icon!r} is not an https address")
    if not re.search(r"\.(svg|png|jpe?g|gif)$", icon):
        problems.append(f"tool.comfy.Icon {icon!r} is not an SVG, PNG, JPG or GIF")
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:
        return problems
    try:
        SpecifierSet(comfy.get("requires-comfyui", ""))
    except InvalidSpecifier:
        problems.append(f"tool.comfy.requires-comfyui {comfy.get('requires-comfyui')!r} is not a version specifier")
    return problems


def test_the_registry_fields_are_complete_and_well_formed():
    data = _metadata()
    assert registry_problems(data) == []
    comfy = data["tool"]["comfy"]
    assert comfy["PublisherId"] == "ltx2-fast"
    assert data["project"]["urls"]["Repository"] == "https://github.com/ltx2-fast/ComfyUI-LTX2-Fast"
    assert "web" not in comfy  # WEB_DIRECTORY serves web/; a `web` key would register it twice (scripts run twice)
    pytest.importorskip("packaging")
    from packaging.specifiers import SpecifierSet

    assert "0.26.0" in SpecifierSet(comfy["requires-comfyui"])  # the ComfyUI the tests run against


def test_the_registry_check_finds_each_fault():
    """The check above can fail: each broken field of a copy of the metadata is named."""
    broken = _metadata()
    broken["project"].update(name="ComfyUI--LTX2", version="1.0", license={"text": "Apache-2.0"}, urls={})
    broken["tool"]["comfy"].update(PublisherId="Ltx 2", Icon=RAW_GITHUB + "ltx2-fast/ComfyUI-LTX2-Fast/main/no.svg")
    del broken["tool"]["comfy"]["requires-comfyui"]
    problems = "\n".join(registry_problems(broken))
    for field in ("project.name", "project.version", "project.license", "Repository", "PublisherId", "Icon",
                  "requires-comfyui"):
        assert field in problems
    broken = _metadata()
    broken["tool"]["comfy"]["requires-comfyui"] = "0.26 or newer"
    expected = ["requires-comfyui"] if _has_packaging() else []
    assert [p.split()[0].split(".")[-1] for p in registry_problems(broken)] == expected


def _has_packaging() -> bool:
    try:
        import packaging.specifiers  # noqa: F401
    except ImportError:
        return False
    return True


def test_dependencies_are_the_requirements_without_torch():
    """The registry lists [project] dependencies; ComfyUI's installers read requirements.txt: the same packages
    (torch left to ComfyUI's own build)."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    required = [line for line in lines if line and line != "torch"]
    assert _metadata()["project"]["dependencies"] == required


def test_the_changelog_starts_at_the_version():
    version = _metadata()["project"]["version"]
    entries = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    entries = entries[1:] if entries[:1] == ["Unreleased"] else entries  # work merged, not yet released
    assert entries and entries[0] == version, (entries[:1], version)


def test_every_node_has_a_description_and_its_help_page():
    """Each node's page under web/docs is the one tools/make_node_docs.py writes from the node (regenerate it after
    changing a description or tooltip), names the node and has a row per input; no page of a node that is gone."""
    from nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

    expected = make_node_docs.pages(NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS)
    folder = ROOT / "web" / "docs"
    assert sorted(p.name for p in folder.glob("*.md")) == sorted(expected)
    for node_id, cls in NODE_CLASS_MAPPINGS.items():
        assert isinstance(cls.DESCRIPTION, str) and cls.DESCRIPTION.strip(), node_id
        text = (folder / f"{node_id}.md").read_text(encoding="utf-8")
        assert text == expected[f"{node_id}.md"], f"{node_id}: run python tools/make_node_docs.py"
        assert text.startswith(f"# {NODE_DISPLAY_NAME_MAPPINGS[node_id]}\n") and f"`{node_id}`" in text
        spec = cls.INPUT_TYPES()
        for name in (*spec["required"], *spec.get("optional", {})):
            assert f"| `{name}`" in text, (node_id, name)


def test_a_help_page_shows_a_changed_tooltip():
    """The page comparison above can fail: a tooltip changed after the pages were written gives another page."""
    from nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

    base = NODE_CLASS_MAPPINGS["LTX2EmptyLatent"]

    class Changed(base):
        @classmethod
        def INPUT_TYPES(cls):
            spec = base.INPUT_TYPES()
            kind, options = spec["required"]["fps"]
            spec["required"]["fps"] = (kind, {**options, "tooltip": "a changed | tooltip"})
            return spec

    name = NODE_DISPLAY_NAME_MAPPINGS["LTX2EmptyLatent"]
    url = make_node_docs.readme_url()
    written = (ROOT / "web" / "docs" / "LTX2EmptyLatent.md").read_text(encoding="utf-8")
    assert make_node_docs.page("LTX2EmptyLatent", base, name, url) == written
    changed = make_node_docs.page("LTX2EmptyLatent", Changed, name, url)
    assert changed != written and "| `fps` | `FLOAT` | a changed \\| tooltip |" in changed


def test_comfyuis_own_parser_reads_the_metadata():
    """ComfyUI parses a pack's pyproject.toml at load (comfy_config): it reads the registry fields as written."""
    path, python = os.environ.get("COMFYUI_PATH"), os.environ.get("COMFYUI_PYTHON")
    if not path or not python or not (Path(path) / "comfy_config").is_dir():
        pytest.skip("no ComfyUI: set COMFYUI_PATH and COMFYUI_PYTHON")
    script = ("import json, sys; from comfy_config import config_parser as c; "
              "p = c.extract_node_configuration(sys.argv[1]); print(json.dumps(p.model_dump()))")
    out = subprocess.run([python, "-c", script, str(ROOT)], cwd=path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    parsed, data = json.loads(out.stdout.strip().splitlines()[-1]), _metadata()
    project, comfy = parsed["project"], parsed["tool_comfy"]
    assert (project["name"], project["version"]) == (data["project"]["name"], data["project"]["version"])
    assert project["license"]["file"] == "LICENSE"
    assert project["urls"]["repository"] == data["project"]["urls"]["Repository"]
    assert project["supported_comfyui_version"] == data["tool"]["comfy"]["requires-comfyui"]
    assert (comfy["publisher_id"], comfy["icon"], comfy["web"]) == ("ltx2-fast", data["tool"]["comfy"]["Icon"], None)
