"""Access to the reference implementation `ltx_core` (PyPI ltx-core==1.0.0, installed with --no-deps).

torchaudio has no CPU build on the package registry used here; ltx_core imports it only for the audio *encoder*'s
mel front-end, so an inert stand-in is registered when the real one is missing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

import pytest
import torch


def _stub_torchaudio() -> None:
    if importlib.util.find_spec("torchaudio") is not None or "torchaudio" in sys.modules:
        return
    stub = types.ModuleType("torchaudio")
    stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    stub.transforms = types.SimpleNamespace(MelSpectrogram=None)
    stub.functional = types.SimpleNamespace(resample=None)
    sys.modules["torchaudio"] = stub


def import_ltx_core():
    """Imports ltx_core or fails the test with the install command (it is a required test dependency)."""
    _stub_torchaudio()
    try:
        import ltx_core  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a broken environment, not a test outcome
        pytest.fail(f"the reference ltx_core is missing ({exc}); run: pip install --no-deps ltx-core==1.0.0")
    import ltx_core

    return ltx_core


def import_ltx_pipelines():
    """Imports ltx_pipelines (the reference denoising loop) or fails the test with the install command."""
    import_ltx_core()
    try:
        import ltx_pipelines.utils.helpers  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a broken environment, not a test outcome
        pytest.fail(f"the reference ltx_pipelines is missing ({exc}); run: pip install --no-deps "
                    "ltx-pipelines==1.0.0 pillow tqdm")
    import ltx_pipelines

    return ltx_pipelines


def reference_transformer(state_dict: dict[str, torch.Tensor], transformer_section: dict) -> torch.nn.Module:
    """The reference LTXModel built from the same metadata section, holding the same weights (strict load)."""
    import_ltx_core()
    from ltx_core.model.transformer import LTXModelConfigurator

    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": transformer_section})
    model.load_state_dict(state_dict, strict=True, assign=True)
    return model.eval()


def reference_connector(config) -> torch.nn.Module:
    """ltx_core's Embeddings1DConnector for our ConnectorConfig (random bf16 registers until weights are loaded)."""
    import_ltx_core()
    from ltx_core.model.transformer.rope import LTXRopeType
    from ltx_core.text_encoders.gemma.embeddings_connector import Embeddings1DConnector

    return Embeddings1DConnector(
        attention_head_dim=config.head_dim, num_attention_heads=config.heads, num_layers=config.num_layers,
        positional_embedding_max_pos=list(config.max_pos), num_learnable_registers=config.num_registers,
        rope_type=LTXRopeType(config.rope_type), double_precision_rope=config.rope_float64,
        apply_gated_attention=config.gated_attention,
    )


def reference_text_processor(config, hidden_size: int, num_hidden_states: int) -> torch.nn.Module:
    """ltx_core's EmbeddingsProcessor (FeatureExtractorV1/V2 + both connectors) for our TextConfig, fp32."""
    import_ltx_core()
    from ltx_core.text_encoders.gemma.embeddings_processor import EmbeddingsProcessor
    from ltx_core.text_encoders.gemma.feature_extractor import FeatureExtractorV1, FeatureExtractorV2

    from ltx2_core.model.text.config import FeatureExtractorKind

    features = hidden_size * num_hidden_states
    if config.kind is FeatureExtractorKind.MEAN_RANGE:
        extractor = FeatureExtractorV1(torch.nn.Linear(features, config.video.width, bias=False), is_av=True)
    else:
        extractor = FeatureExtractorV2(torch.nn.Linear(features, config.video.width), hidden_size,
                                       torch.nn.Linear(features, config.audio.width))
    processor = EmbeddingsProcessor(feature_extractor=extractor, video_connector=reference_connector(config.video),
                                    audio_connector=reference_connector(config.audio))
    return processor.float().eval()
