"""LTX-2 SamplerCustomAdvanced (fast) on ComfyUI's native objects (nodes/native_sampler.py, nodes/native_model.py):
built here as ComfyUI 0.26.0 builds them, duck-typed (the guider's class names, `original_conds` in convert_cond's
form, KSamplerSelect's `sampler_function`); the native diffusion model is a second tiny transformer with the
checkpoint's parameter names, as ComfyUI's LTXAVModel has them. The shared ComfyUI's real objects: tests/e2e."""

from __future__ import annotations

import types

import pytest
import torch

from ltx2_core import GuidanceParams, TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.demo.transformer import random_weights_
from ltx2_core.hosts import LocalHost
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.sampling import sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent
from ltx2_core.types import TextEmbeddings
from nodes.interop import from_comfy, split, to_comfy
from nodes.native_model import adopt, native_transformer
from nodes.native_sampler import LTX2SamplerCustomAdvanced

CONFIG = TransformerConfig.tiny("2.3")
TEXT = TextConfig.tiny(CONFIG)
SIGMAS = (1.0, 0.6, 0.25, 0.0)


def native_model(seed: int = 4) -> torch.nn.Module:
    """ComfyUI's LTXAVModel as far as names go: the DiT's tensors plus the two text connectors."""
    model = demo_transformer(CONFIG, seed=seed)
    for name, stream in (("video_embeddings_connector", TEXT.video), ("audio_embeddings_connector", TEXT.audio)):
        with torch.device("meta"):
            connector = EmbeddingsConnector(stream)
        model.add_module(name, random_weights_(connector, seed + 1).eval())
    return model


def patcher(model: torch.nn.Module, options: dict | None = None) -> object:
    unet_config = {**CONFIG.to_metadata(), **TEXT.to_metadata(), "image_model": "ltxav"}
    base = types.SimpleNamespace(diffusion_model=model, model_config=types.SimpleNamespace(unet_config=unet_config),
                                 manual_cast_dtype=None, get_dtype=lambda: torch.float32)
    return types.SimpleNamespace(model=base, model_options=options or {"transformer_options": {}})


def cond(embeddings: TextEmbeddings, **options) -> list[dict]:
    """A CONDITIONING as CFGGuider keeps it (comfy.sampler_helpers.convert_cond)."""
    return [{**options, "cross_attn": torch.cat((embeddings.video, embeddings.audio), -1), "model_conds": {},
             "uuid": "u"}]


class CFGGuider:  # ComfyUI's class name is what the node reads
    def __init__(self, model_patcher, positive, negative, cfg):
        self.model_patcher, self.model_options, self.cfg = model_patcher, model_patcher.model_options, cfg
        self.original_conds = {"positive": positive} | ({} if negative is None else {"negative": negative})


class Noise_RandomNoise:
    def __init__(self, seed):
        self.seed = seed


def sample_euler(): ...


def sample_euler_ancestral(): ...


def sample_euler_ancestral_cfg_pp(): ...


def ksampler(function, **extra):
    return types.SimpleNamespace(sampler_function=function, extra_options=extra)


def prompts(seed: int = 0) -> tuple[TextEmbeddings, TextEmbeddings]:
    g = torch.Generator().manual_seed(seed)
    make = lambda: TextEmbeddings(torch.randn(1, 8, CONFIG.video.context_dim, generator=g),  # noqa: E731
                                  torch.randn(1, 8, CONFIG.audio.context_dim, generator=g))
    return make(), make()


def test_adopt_builds_ours_from_the_native_modules_and_tensors_without_a_copy():
    theirs = native_model()
    ours = native_transformer(theirs, CONFIG, torch.device("cpu"), torch.float32)
    assert ours.transformer_blocks[0].attn1.to_q is theirs.transformer_blocks[0].attn1.to_q  # the module itself
    assert ours.scale_shift_table is theirs.scale_shift_table  # on the device in the dtype: the tensor itself
    assert not any(p.is_meta for p in ours.parameters())
    # a tensor in another dtype is copied for the run; the native one is left as it was
    half = adopt(type(ours)(CONFIG).to("meta"), theirs, torch.device("cpu"), torch.float64)
    assert half.scale_shift_table.dtype == torch.float64 and theirs.scale_shift_table.dtype == torch.float32


def test_adopt_refuses_a_model_of_another_structure():
    other = demo_transformer(TransformerConfig.tiny("2.0"), seed=1)
    with pytest.raises(ValueError, match="SamplerCustomAdvanced"):
        native_transformer(other, CONFIG, torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("cfg,function", [(1.0, sample_euler), (3.0, sample_euler), (1.0, sample_euler_ancestral)])
def test_the_node_equals_our_sampler_on_the_same_weights(cfg, function):
    model = native_model()
    positive, negative = prompts()
    latent = empty_latent(96, 64, 9, 24.0)
    native_latent = {"samples": to_comfy(latent)["samples"], "downscale_ratio_spacial": 32}
    guider = CFGGuider(patcher(model), cond(positive, frame_rate=24.0), cond(negative, frame_rate=24.0), cfg)
    out, denoised = LTX2SamplerCustomAdvanced().sample(Noise_RandomNoise(11), guider, ksampler(function),
                                                       torch.tensor(SIGMAS), native_latent)
    assert out is denoised and out["downscale_ratio_spacial"] == 32
    guidance = GuidanceParams(cfg=cfg)
    stage = Stage(sigma_table(SIGMAS), video_guidance=guidance, audio_guidance=guidance,
                  ancestral_seed=12 if function is sample_euler_ancestral else None)
    with LocalHost(model, "cpu", torch.float32).sampler() as (run, _):
        expected = run(positive, None if cfg == 1 else negative, latent, stage, torch.Generator().manual_seed(11))
    video, audio = split(out)
    # the same computation on the same tensors in one process: equal up to summation order only
    torch.testing.assert_close(video, expected.video, rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, expected.audio, rtol=0, atol=1e-5)
    assert from_comfy(out).fps == 24.0


def _refusal(match: str, **change):
    model = native_model()
    positive, negative = prompts()
    args = dict(noise=Noise_RandomNoise(1), guider=CFGGuider(patcher(model), cond(positive), cond(negative), 1.0),
                sampler=ksampler(sample_euler), sigmas=torch.tensor(SIGMAS),
                latent_image=dict(to_comfy(empty_latent(64, 64, 9, 24.0))))
    with pytest.raises(ValueError, match=match):
        LTX2SamplerCustomAdvanced().sample(**(args | change))


def test_refusals_name_what_works():
    class DualCFGGuider(CFGGuider):
        pass

    model = native_model()
    positive, negative = prompts()
    _refusal("euler or euler_ancestral", sampler=ksampler(sample_euler_ancestral_cfg_pp))
    _refusal("eta 0.5", sampler=ksampler(sample_euler_ancestral, eta=0.5))
    _refusal("CFGGuider or BasicGuider", guider=DualCFGGuider(patcher(model), cond(positive), cond(negative), 1.0))
    _refusal("model patches", guider=CFGGuider(patcher(model, {"transformer_options": {"patches_replace": {"x": 1}}}),
                                               cond(positive), cond(negative), 1.0))
    _refusal("needs a negative prompt", guider=CFGGuider(patcher(model), cond(positive), None, 4.0))
    _refusal("fall strictly", sigmas=torch.tensor([1.0, 0.5]))
    _refusal("RandomNoise", noise=types.SimpleNamespace(seed=None))
    audio_only = {"samples": to_comfy(empty_latent(64, 64, 9, 24.0))["samples"].tensors[1], "type": "audio"}
    _refusal("audio-only", latent_image=audio_only)
    wrong = patcher(model)
    wrong.model.model_config.unet_config = {"image_model": "flux"}
    _refusal("not LTX-2's audio", guider=CFGGuider(wrong, cond(positive), cond(negative), 1.0))


def test_an_img_to_video_latent_keeps_its_first_frame():
    """LTXVImgToVideoInplace's mask at strength 1 (nodes.interop.mask_conditions): frame 0 held exactly."""
    model = native_model()
    positive, negative = prompts()
    video = torch.randn(1, 128, 2, 2, 3, generator=torch.Generator().manual_seed(2))
    mask = torch.ones(1, 1, 2, 1, 1)
    mask[:, :, 0] = 0.0
    latent = {"samples": to_comfy(empty_latent(96, 64, 9, 24.0)._replace(video=video))["samples"],
              "noise_mask": to_comfy(empty_latent(96, 64, 9, 24.0)._replace(video=mask))["samples"]}
    latent["noise_mask"].tensors[1].fill_(1.0)
    guider = CFGGuider(patcher(model), cond(positive), cond(negative), 1.0)
    out, _ = LTX2SamplerCustomAdvanced().sample(Noise_RandomNoise(3), guider, ksampler(sample_euler),
                                                torch.tensor(SIGMAS), latent)
    got, _ = split(out)
    assert torch.equal(got[:, :, 0], video[:, :, 0]) and (got[:, :, 1] - video[:, :, 1]).abs().max() > 1e-2


def test_native_guides_are_refused_before_the_model_loads(monkeypatch):
    """LTXVAddGuide's keyframe data names our nodes, and nothing is loaded first."""
    from nodes import bridge

    def no_load(*_):
        raise AssertionError("the model was loaded before the prompts were checked")

    monkeypatch.setattr(bridge, "load_native_model", no_load)
    positive, negative = prompts()
    guided = cond(positive, keyframe_idxs=torch.zeros(1, 3, 6, 2))
    _refusal("LTX-2 Image Condition", guider=CFGGuider(patcher(native_model()), guided, cond(negative), 1.0))


def test_adopt_refuses_a_layer_whose_bias_differs_from_the_config():
    """ComfyUI 0.26.0 builds LTX-2.5's feed-forwards with biases the release lacks: such a model is refused."""
    theirs = native_model()
    old = theirs.transformer_blocks[0].ff.net[2]
    theirs.transformer_blocks[0].ff.net[2] = torch.nn.Linear(old.in_features, old.out_features, bias=False)
    with pytest.raises(ValueError, match="bias.*LTX-2 Model Loader"):
        native_transformer(theirs, CONFIG, torch.device("cpu"), torch.float32)
