"""The package's public face: the entry points the nodes call are exported from `ltx2_core`, the internals are not,
and the demo models stay off the production path (built only when no checkpoint is given)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ltx2_core

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = ("generate", "Request", "Generation", "Models", "ModelFiles", "PromptEncoder", "load_transformer",
                "load_prompt_encoder", "load_video_decoder", "load_video_encoder", "load_audio_decoder",
                "load_vocoder", "load_upsampler", "load_lora", "fused_loras", "decode_video", "decode_audio",
                "upsample_latent", "LTX2Error", "NonFiniteError")
INTERNALS = ("StreamInput", "BatchPerturbations", "RunConstants", "Rope", "PassPerturbation", "to_x0",
             "LTX2Transformer", "demo_models")


def test_entry_points_are_exported_and_internals_are_not():
    assert set(ENTRY_POINTS) <= set(ltx2_core.__all__)
    assert all(getattr(ltx2_core, name) is not None for name in ltx2_core.__all__)
    assert not [name for name in INTERNALS if name in ltx2_core.__all__ or hasattr(ltx2_core, name)]


def test_the_demo_is_imported_only_when_asked_for():
    script = (
        "import sys\n"
        "import ltx2_core, ltx2_core.pipeline, ltx2_core.model_files, ltx2_core.__main__\n"
        "assert 'ltx2_core.demo' not in sys.modules, 'imported at module level'\n"
        "from ltx2_core import ModelFiles\n"
        "models = ModelFiles().load()\n"
        "assert 'ltx2_core.demo' in sys.modules and models.transformer.config.num_layers < 48\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_the_pipeline_knows_nothing_of_the_demo():
    assert "demo" not in (ROOT / "ltx2_core" / "pipeline.py").read_text().lower()
