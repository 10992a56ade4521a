"""A full sampling run vs the reference loop (`ltx_pipelines.utils.helpers.denoise_audio_video` with
`euler_denoising_loop` and `multi_modal_guider_factory_denoising_func`): same tiny weights, same seed, fp32.

Both sides draw the same noise (token layout, video then audio, one seeded generator) and compute their own token
positions, so the comparison also covers the latent shapes and positions. Tolerance atol=rtol=1e-4 after 4 steps:
each forward agrees to ~2e-6 (transformer parity) and the guidance amplifies differences by up to
1 + (cfg−1) + stg + (mod−1) = 10 (audio) per step; measured max differences are given per test.
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_latent_length, audio_positions, unpatchify_audio, unpatchify_video, video_positions
from ltx2_core.sampling import (
    DISTILLED_SIGMAS,
    STAGE2_SIGMAS,
    GuidanceParams,
    denoise,
    guided_setup,
    ltx2_sigmas,
    noised_state,
    sigma_table,
)
from ltx2_core.types import TextEmbeddings
from support.reference import import_ltx_pipelines, reference_transformer

TOL = dict(atol=1e-4, rtol=1e-4)
FRAMES, HEIGHT, WIDTH, FPS, TEXT_TOKENS, SEED = 17, 64, 96, 24.0, 8, 11
STG_BLOCK = 1


def _models(version: str):
    config = TransformerConfig.tiny(version)
    ours = demo_transformer(config, seed=2)
    ref = reference_transformer({k: v.clone() for k, v in ours.state_dict().items()}, config.to_metadata())
    return ours, ref


def _texts(config: TransformerConfig) -> tuple[TextEmbeddings, TextEmbeddings]:
    g = torch.Generator().manual_seed(5)
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    positive = TextEmbeddings(*(torch.randn(1, TEXT_TOKENS, w, generator=g) for w in widths))
    negative = TextEmbeddings(*(torch.randn(1, TEXT_TOKENS, w, generator=g) for w in widths))
    return positive, negative


def _ours(model, positive, negative, sigmas, video_guidance=None, audio_guidance=None, initial=None, scale=1.0):
    frames, rows, cols = (FRAMES - 1) // 8 + 1, HEIGHT // 32, WIDTH // 32
    audio_tokens = audio_latent_length(FRAMES, FPS)
    plan = guided_setup(model, positive, negative, video_positions(frames, rows, cols, FPS),
                        audio_positions(audio_tokens), video_guidance, audio_guidance)
    generator = torch.Generator().manual_seed(SEED)
    noise_video = torch.randn(1, frames * rows * cols, 128, generator=generator)
    noise_audio = torch.randn(1, audio_tokens, 128, generator=generator)
    initial = initial or (torch.zeros_like(noise_video), torch.zeros_like(noise_audio))
    video = noised_state(initial[0], noise_video, scale)
    audio = noised_state(initial[1], noise_audio, scale)
    video, audio = denoise(plan, video, audio, sigmas)
    return unpatchify_video(video.latent, frames, rows, cols), unpatchify_audio(audio.latent, 8)


def _reference(ref, positive, negative, sigmas, video_guidance=None, audio_guidance=None, initial=None, scale=1.0,
               conditionings=()):
    import_ltx_pipelines()
    from ltx_core.components.diffusion_steps import EulerDiffusionStep
    from ltx_core.components.guiders import MultiModalGuiderParams, create_multimodal_guider_factory
    from ltx_core.components.noisers import GaussianNoiser
    from ltx_core.model.transformer import X0Model
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.utils.helpers import (
        denoise_audio_video,
        multi_modal_guider_factory_denoising_func,
        simple_denoising_func,
    )
    from ltx_pipelines.utils.samplers import euler_denoising_loop
    from ltx_pipelines.utils.types import PipelineComponents

    transformer = X0Model(ref)

    def params(g: GuidanceParams) -> MultiModalGuiderParams:
        return MultiModalGuiderParams(cfg_scale=g.cfg, stg_scale=g.stg, stg_blocks=list(g.stg_blocks),
                                      rescale_scale=g.rescale, modality_scale=g.modality)

    if video_guidance is None:
        denoise_fn = simple_denoising_func(positive.video, positive.audio, transformer)
    else:
        denoise_fn = multi_modal_guider_factory_denoising_func(
            create_multimodal_guider_factory(params(video_guidance), negative_context=negative.video),
            create_multimodal_guider_factory(params(audio_guidance), negative_context=negative.audio),
            positive.video, positive.audio, transformer)

    def loop(sigmas, video_state, audio_state, stepper):
        return euler_denoising_loop(sigmas, video_state, audio_state, stepper, denoise_fn)

    video, audio = denoise_audio_video(
        output_shape=VideoPixelShape(batch=1, frames=FRAMES, width=WIDTH, height=HEIGHT, fps=FPS),
        conditionings=list(conditionings), noiser=GaussianNoiser(torch.Generator().manual_seed(SEED)), sigmas=sigmas,
        stepper=EulerDiffusionStep(), denoising_loop_fn=loop,
        components=PipelineComponents(dtype=torch.float32, device=torch.device("cpu")), dtype=torch.float32,
        device=torch.device("cpu"), noise_scale=scale,
        initial_video_latent=None if initial is None else unpatchify_video(initial[0], FRAMES // 8 + 1, HEIGHT // 32,
                                                                           WIDTH // 32),
        initial_audio_latent=None if initial is None else unpatchify_audio(initial[1], 8))
    return video.latent, audio.latent


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_four_guided_steps_with_all_passes_match_the_reference_loop(version, one_thread):
    """The released defaults (cfg 3/7, stg 1 in one block, modality 3, rescale 0.7): all four passes run."""
    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    video_guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    audio_guidance = GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    sigmas = ltx2_sigmas(4)
    got = _ours(ours, positive, negative, sigmas, video_guidance, audio_guidance)
    want = _reference(ref, positive, negative, sigmas, video_guidance, audio_guidance)
    assert got[0].shape == want[0].shape and got[1].shape == want[1].shape
    torch.testing.assert_close(got[0], want[0], **TOL)  # measured max |Δ| 8.8e-6 (2.0), 8.1e-6 (2.3) on values up to 6
    torch.testing.assert_close(got[1], want[1], **TOL)
    # the run moved far from the initial noise, so agreement is not trivial
    assert (got[0] - _ours(ours, positive, negative, sigmas[-2:])[0]).abs().max() > 0.1


def test_guidance_of_one_modality_only(one_thread):
    """Video guided by cfg alone, audio by STG alone: the other terms get weight 0 in the shared passes."""
    ours, ref = _models("2.0")
    positive, negative = _texts(ours.config)
    video_guidance = GuidanceParams(cfg=4.0, rescale=0.5)
    audio_guidance = GuidanceParams(stg=2.0, stg_blocks=(0, 2))
    sigmas = ltx2_sigmas(3)
    got = _ours(ours, positive, negative, sigmas, video_guidance, audio_guidance)
    want = _reference(ref, positive, negative, sigmas, video_guidance, audio_guidance)
    torch.testing.assert_close(got[0], want[0], **TOL)
    torch.testing.assert_close(got[1], want[1], **TOL)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_distilled_schedule_without_guidance_matches_the_reference_loop(version, one_thread):
    ours, ref = _models(version)
    positive, _ = _texts(ours.config)
    sigmas = sigma_table(DISTILLED_SIGMAS)
    got = _ours(ours, positive, None, sigmas)
    want = _reference(ref, positive, None, sigmas)
    torch.testing.assert_close(got[0], want[0], **TOL)
    torch.testing.assert_close(got[1], want[1], **TOL)


def _upsampled_latent(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A stage-2 starting point in the token layout: (video (1, tokens, 128), audio (1, tokens, 128))."""
    frames, rows, cols = FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32
    return (torch.randn(1, frames * rows * cols, 128, generator=g),
            torch.randn(1, audio_latent_length(FRAMES, FPS), 128, generator=g))


def _reference_items(conditions) -> list:
    """Our encoded images as `combined_image_conditionings` makes them: frame 0 replaces, the others are keyframes."""
    from ltx_core.conditioning.types.keyframe_cond import VideoConditionByKeyframeIndex
    from ltx_core.conditioning.types.latent_cond import VideoConditionByLatentIndex

    return [VideoConditionByLatentIndex(latent=c.latent, strength=c.strength, latent_idx=0) if c.frame == 0 else
            VideoConditionByKeyframeIndex(keyframes=c.latent, frame_idx=c.frame, strength=c.strength)
            for c in conditions]


def test_stage_two_renoise_and_refine_match_the_reference(one_thread):
    """Stage 2: a given latent (the upsampled stage-1 result) re-noised to 0.909375, 3 unguided steps."""
    ours, ref = _models("2.0")
    positive, _ = _texts(ours.config)
    g = torch.Generator().manual_seed(8)
    initial = _upsampled_latent(g)
    sigmas = sigma_table(STAGE2_SIGMAS)
    got = _ours(ours, positive, None, sigmas, initial=initial, scale=STAGE2_SIGMAS[0])
    want = _reference(ref, positive, None, sigmas, initial=initial, scale=STAGE2_SIGMAS[0])
    torch.testing.assert_close(got[0], want[0], **TOL)
    torch.testing.assert_close(got[1], want[1], **TOL)


@pytest.mark.parametrize("images", [[(0, 1.0)], [(8, 0.9), (16, 1.0)], [(0, 0.7), (16, 1.0)]],
                         ids=["frame-0", "keyframes-middle-and-last", "frame-0-and-last"])
def test_four_guided_steps_with_images_match_the_reference_pipeline(images, one_thread):
    """Conditioning as `combined_image_conditionings` builds it: frame 0 replaces the first latent frame, any
    other frame is an appended keyframe; the same encoded latents (random here) on both sides."""
    import_ltx_pipelines()
    from ltx2_core.conditioning.images import EncodedImage
    from ltx2_core.sampling.stage import Stage
    from ltx2_core.stages import empty_latent, sample

    ours, ref = _models("2.0")
    positive, negative = _texts(ours.config)
    video_guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    audio_guidance = GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    g = torch.Generator().manual_seed(21)
    latents = [torch.randn(1, 128, 1, HEIGHT // 32, WIDTH // 32, generator=g) for _ in images]
    conditions = [EncodedImage(latent, frame, strength) for latent, (frame, strength) in zip(latents, images)]
    theirs = _reference_items(conditions)
    sigmas = ltx2_sigmas(4)
    got = sample(ours, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                 Stage(sigmas, video_guidance=video_guidance, audio_guidance=audio_guidance, conditions=conditions),
                 torch.Generator().manual_seed(SEED))
    want = _reference(ref, positive, negative, sigmas, video_guidance, audio_guidance, conditionings=theirs)
    torch.testing.assert_close(got.video, want[0], **TOL)
    torch.testing.assert_close(got.audio, want[1], **TOL)
    free = _ours(ours, positive, negative, sigmas, video_guidance, audio_guidance)
    assert (got.video - free[0]).abs().max() > 0.01  # the images changed the run


def test_stage_two_refine_with_images_matches_the_reference(one_thread):
    """Stage 2 with the images re-applied at full size: the upsampled latent re-noised to 0.909375 except where the
    images hold it, 3 unguided steps."""
    import_ltx_pipelines()
    from ltx2_core.conditioning.images import EncodedImage
    from ltx2_core.sampling.stage import Stage
    from ltx2_core.stages import AVLatent, sample

    ours, ref = _models("2.3")
    positive, _ = _texts(ours.config)
    g = torch.Generator().manual_seed(8)
    initial = _upsampled_latent(g)
    frames, rows, cols = FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32
    first, last = (torch.randn(1, 128, 1, rows, cols, generator=g) for _ in range(2))
    conditions = [EncodedImage(first, 0, 1.0), EncodedImage(last, FRAMES - 1, 0.8)]
    theirs = _reference_items(conditions)
    sigmas = sigma_table(STAGE2_SIGMAS)
    latent = AVLatent(unpatchify_video(initial[0], frames, rows, cols), unpatchify_audio(initial[1], 8), FPS)
    got = sample(ours, positive, None, latent, Stage(sigmas, noise_scale=STAGE2_SIGMAS[0], conditions=conditions),
                 torch.Generator().manual_seed(SEED))
    want = _reference(ref, positive, None, sigmas, initial=initial, scale=STAGE2_SIGMAS[0], conditionings=theirs)
    torch.testing.assert_close(got.video, want[0], **TOL)
    torch.testing.assert_close(got.audio, want[1], **TOL)
    assert torch.equal(got.video[:, :, :1], first)  # strength 1 holds it exactly in stage 2 too


def _control_items(conditions, masks=None) -> list:
    """Our encoded images and controls as `ICLoraPipeline._create_conditionings` makes them: the images first, the
    IC-LoRA references (`VideoConditionByReferenceLatent`) after, wrapped in `ConditioningItemAttentionStrengthWrapper`
    where the control has attention weights. `masks`: per control, the reference's inputs (attention strength,
    pixel mask (1, 1, F, H, W) or None) from which `_create_conditionings` builds the wrapper's mask itself."""
    from ltx_core.conditioning import ConditioningItemAttentionStrengthWrapper, VideoConditionByReferenceLatent
    from ltx_core.types import VideoLatentShape
    from ltx_pipelines.ic_lora import ICLoraPipeline

    from ltx2_core.conditioning.control import EncodedControl

    images = [c for c in conditions if not isinstance(c, EncodedControl)]
    controls = [c for c in conditions if isinstance(c, EncodedControl)]
    items = _reference_items(images)
    for index, c in enumerate(controls):
        item = VideoConditionByReferenceLatent(latent=c.latent, downscale_factor=c.downscale, strength=c.strength)
        weights = c.attention
        if masks is not None and masks[index] is not None:
            strength, pixels = masks[index]
            shape = VideoLatentShape.from_torch_shape(c.latent.shape)
            weights = ICLoraPipeline._downsample_mask_to_latent(pixels, shape) * strength if pixels is not None \
                else (strength if strength < 1 else None)
        items.append(item if weights is None else ConditioningItemAttentionStrengthWrapper(item, weights))
    return items


def _controls(g: torch.Generator, shapes) -> list:
    from ltx2_core.conditioning.control import EncodedControl

    return [EncodedControl(torch.randn(1, 128, *shape, generator=g), *settings) for shape, *settings in shapes]


CONTROL_CASES = {
    "full-size": [((FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32), 1.0, 1)],
    "half-size-with-image": [((FRAMES // 8 + 1, HEIGHT // 64, 1), 1.0, 2)],
    "two-controls-weaker": [((FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32), 0.6, 1),
                            ((FRAMES // 8 + 1, 1, 1), 0.9, 2)],
}


@pytest.mark.parametrize("case", list(CONTROL_CASES))
def test_control_conditioned_state_matches_the_reference_items(case, one_thread):
    """The video stream's state (tokens, clean values, positions, denoise mask) with IC-LoRA controls appended, and
    an image at frame 0 in one case, vs `VideoConditionByReferenceLatent` applied to the reference's initial state."""
    import_ltx_pipelines()
    from ltx_core.components.patchifiers import VideoLatentPatchifier
    from ltx_core.tools import VideoLatentTools
    from ltx_core.types import VideoLatentShape, VideoPixelShape

    from ltx2_core.conditioning import EncodedImage, condition_video

    g = torch.Generator().manual_seed(31)
    frames, rows, cols = FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32
    conditions = _controls(g, CONTROL_CASES[case])
    if case == "half-size-with-image":
        conditions.insert(0, EncodedImage(torch.randn(1, 128, 1, rows, cols, generator=g), 0, 0.8))
    initial = torch.randn(1, frames * rows * cols, 128, generator=g)
    ours = condition_video(initial, video_positions(frames, rows, cols, FPS), conditions, FPS)
    shape = VideoLatentShape.from_pixel_shape(VideoPixelShape(batch=1, frames=FRAMES, width=WIDTH, height=HEIGHT,
                                                              fps=FPS), latent_channels=128)
    tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), shape, FPS)
    state = tools.create_initial_state("cpu", torch.float32, unpatchify_video(initial, frames, rows, cols))
    for item in _control_items(conditions):
        state = item.apply_to(state, tools)
    assert state.attention_mask is None and ours.attention is None
    assert ours.tokens == frames * rows * cols and ours.clean.shape == state.clean_latent.shape
    for got, want in ((ours.clean, state.clean_latent), (ours.positions, state.positions),
                      (ours.denoise_mask(), state.denoise_mask)):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-5)  # measured: exact (0.0)


@pytest.mark.parametrize("version,case", [("2.0", "full-size"), ("2.3", "half-size-with-image"),
                                          ("2.0", "two-controls-weaker")])
def test_four_guided_steps_with_controls_match_the_reference_pipeline(version, case, one_thread):
    """Four guided steps (all four passes) with IC-LoRA controls appended as `ICLoraPipeline` appends them: the
    same encoded control latents (random here) on both sides; the guiding tokens dropped after the last step."""
    import_ltx_pipelines()
    from ltx2_core.conditioning import EncodedImage
    from ltx2_core.sampling.stage import Stage
    from ltx2_core.stages import empty_latent, sample

    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    video_guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    audio_guidance = GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    g = torch.Generator().manual_seed(23)
    conditions = _controls(g, CONTROL_CASES[case])
    if case == "half-size-with-image":
        conditions.insert(0, EncodedImage(torch.randn(1, 128, 1, HEIGHT // 32, WIDTH // 32, generator=g), 0, 1.0))
    sigmas = ltx2_sigmas(4)
    got = sample(ours, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                 Stage(sigmas, video_guidance=video_guidance, audio_guidance=audio_guidance, conditions=conditions),
                 torch.Generator().manual_seed(SEED))
    want = _reference(ref, positive, negative, sigmas, video_guidance, audio_guidance,
                      conditionings=_control_items(conditions))
    assert got.video.shape == want[0].shape  # the control tokens are gone
    # measured max |Δ| video / audio: 1.1e-5 / 9.1e-6 (full-size), 8.6e-6 / 1.4e-5 (half-size), 1.1e-5 / 9.1e-6 (two)
    torch.testing.assert_close(got.video, want[0], **TOL)
    torch.testing.assert_close(got.audio, want[1], **TOL)
    free = _ours(ours, positive, negative, sigmas, video_guidance, audio_guidance)
    assert (got.video - free[0]).abs().max() > 0.01  # the controls changed the run


def _pixel_mask(g: torch.Generator, zero_top: bool) -> torch.Tensor:
    """A pixel-space attention mask (FRAMES, HEIGHT, WIDTH) in [0, 1]; `zero_top`: its top half 0 (never attended:
    the dtype's minimum as bias)."""
    mask = torch.rand(FRAMES, HEIGHT, WIDTH, generator=g)
    if zero_top:
        mask[:, : HEIGHT // 2] = 0.0
    return mask


# per case: the controls ((latent frames, rows, cols), strength, downscale, attention strength, mask kind or None),
# and whether a keyframe image (appended tokens before the controls) is held at pixel frame 8
WEIGHTED_CASES = {
    "attention-0.5": ([((FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32), 1.0, 1, 0.5, None)], False),
    "mask-half-size-with-keyframe": ([((FRAMES // 8 + 1, HEIGHT // 64, 1), 0.9, 2, 0.7, "rand")], True),
    "two-controls-second-masked": ([((FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32), 1.0, 1, 1.0, None),
                                    ((FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32), 0.8, 1, 1.0, "zero-top")], False),
}


def _weighted_conditions(case: str, g: torch.Generator) -> tuple[list, list]:
    """Our conditions (a keyframe image first where the case has one, then the controls with their attention
    weights from `control_weights`) and, per control, the reference's (attention strength, pixel mask) inputs."""
    from ltx2_core.conditioning import EncodedImage
    from ltx2_core.conditioning.control import ControlCondition, EncodedControl, control_weights

    controls, keyframe = WEIGHTED_CASES[case]
    conditions, specs = [], []
    if keyframe:
        conditions.append(EncodedImage(torch.randn(1, 128, 1, HEIGHT // 32, WIDTH // 32, generator=g), 8, 0.9))
    for shape, strength, downscale, attention, kind in controls:
        latent = torch.randn(1, 128, *shape, generator=g)
        mask = None if kind is None else _pixel_mask(g, kind == "zero-top")
        control = ControlCondition("unused.mp4", strength, downscale, attention, mask)
        weights = control_weights(control, FRAMES, HEIGHT, WIDTH, shape)
        conditions.append(EncodedControl(latent, strength, downscale, weights))
        specs.append((attention, None if mask is None else mask[None, None]))
    return conditions, specs


@pytest.mark.parametrize("case", list(WEIGHTED_CASES))
def test_weighted_control_state_matches_the_attention_strength_wrapper(case, one_thread):
    """Controls with an attention strength below 1 or a pixel-space mask: the video stream's state, its attention
    weights included, vs `ConditioningItemAttentionStrengthWrapper` (the mask downsampled by
    `ICLoraPipeline._downsample_mask_to_latent`) applied to the reference's initial state; the bias the transformer
    adds vs `_prepare_self_attention_mask`."""
    import_ltx_pipelines()
    from ltx_core.components.patchifiers import VideoLatentPatchifier
    from ltx_core.model.transformer.transformer_args import TransformerArgsPreprocessor
    from ltx_core.tools import VideoLatentTools
    from ltx_core.types import VideoLatentShape, VideoPixelShape

    from ltx2_core.conditioning import condition_video
    from ltx2_core.model.transformer.attention import attention_bias

    g = torch.Generator().manual_seed(37)
    frames, rows, cols = FRAMES // 8 + 1, HEIGHT // 32, WIDTH // 32
    conditions, specs = _weighted_conditions(case, g)
    initial = torch.randn(1, frames * rows * cols, 128, generator=g)
    ours = condition_video(initial, video_positions(frames, rows, cols, FPS), conditions, FPS)
    shape = VideoLatentShape.from_pixel_shape(VideoPixelShape(batch=1, frames=FRAMES, width=WIDTH, height=HEIGHT,
                                                              fps=FPS), latent_channels=128)
    tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), shape, FPS)
    state = tools.create_initial_state("cpu", torch.float32, unpatchify_video(initial, frames, rows, cols))
    for item in _control_items(conditions, specs):
        state = item.apply_to(state, tools)
    assert ours.attention is not None and ours.attention.shape == state.attention_mask.shape
    for got, want in ((ours.clean, state.clean_latent), (ours.positions, state.positions),
                      (ours.denoise_mask(), state.denoise_mask), (ours.attention, state.attention_mask)):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-5)  # measured: exact (0.0)
    assert ours.attention.min() < 1  # weighted: not all ones
    want = TransformerArgsPreprocessor._prepare_self_attention_mask(None, state.attention_mask, torch.float32)
    assert torch.equal(attention_bias(ours.attention, torch.float32), want)


@pytest.mark.parametrize("version,case", [("2.0", "attention-0.5"), ("2.3", "mask-half-size-with-keyframe"),
                                          ("2.0", "two-controls-second-masked")])
def test_four_guided_steps_with_weighted_controls_match_the_reference_pipeline(version, case, one_thread):
    """Four guided steps (all four passes, the log bias in the video self-attention of each) with weighted controls
    as `ICLoraPipeline` wraps them; the weights changed the run."""
    import_ltx_pipelines()
    from ltx2_core.sampling.stage import Stage
    from ltx2_core.stages import empty_latent, sample

    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    video_guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    audio_guidance = GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)
    conditions, specs = _weighted_conditions(case, torch.Generator().manual_seed(41))
    sigmas = ltx2_sigmas(4)

    def run(conditions):
        return sample(ours, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                      Stage(sigmas, video_guidance=video_guidance, audio_guidance=audio_guidance,
                            conditions=conditions), torch.Generator().manual_seed(SEED))

    got = run(conditions)
    want = _reference(ref, positive, negative, sigmas, video_guidance, audio_guidance,
                      conditionings=_control_items(conditions, specs))
    print(f"{case}: max |Δ| video {(got.video - want[0]).abs().max():.2e} audio {(got.audio - want[1]).abs().max():.2e}")
    torch.testing.assert_close(got.video, want[0], **TOL)
    torch.testing.assert_close(got.audio, want[1], **TOL)
    unweighted = run([c._replace(attention=None) if hasattr(c, "attention") else c for c in conditions])
    assert (got.video - unweighted.video).abs().max() > 1e-3  # the attention weights changed the run
