"""What differs between the LTX-2 releases, one frozen `Release` record per version.

Everything a release decides without a file to read lives here: the sampling defaults of its pipelines (steps,
guidance scales, the perturbed blocks of STG), the sizes of its released transformer that are checked before any
file is read (blocks, heads), the structure flags of the tiny test / demo transformer, and the default clip sizes of
the command line. The architecture of a real checkpoint still comes from its metadata (model/transformer/config.py);
`tests/unit/test_releases.py` checks that each record agrees with the released configs. A new release is one more
`ModelVersion` member and one more entry in `RELEASES`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from ltx2_core.errors import UnknownModelVersionError


class ModelVersion(str, enum.Enum):
    """Model generation; selects defaults (guidance, steps). Architecture flags come from the config itself."""

    V2_0 = "2.0"
    V2_3 = "2.3"
    V2_5 = "2.5"


class GuidanceScales(NamedTuple):
    """One modality's released guidance scales (`sampling.guidance.GuidanceParams` without the STG blocks)."""

    cfg: float
    stg: float
    rescale: float
    modality: float


class ClipSize(NamedTuple):
    width: int  # pixels, a multiple of 32 (64 for the two-stage pipelines)
    height: int
    frames: int  # pixel frames, 8k+1


class ClipSizes(NamedTuple):
    """The default clip of the one-stage pipeline and of the two-stage / distilled ones (sampled at half size)."""

    one_stage: ClipSize
    two_stage: ClipSize


@dataclass(frozen=True)
class Release:
    """One release of LTX-2: its defaults and the facts about it that are needed before a checkpoint is read."""

    version: ModelVersion
    name: str  # as Lightricks names it
    layers: int  # transformer blocks of the released checkpoints
    heads: tuple[int, int]  # (video, audio) attention heads: what tensor / sequence parallel degrees must divide
    # the transformer's structure flags, as `TransformerConfig` reads them from a checkpoint's metadata
    gated_attention: bool
    cross_attention_adaln: bool
    caption_before_connector: bool  # the caption projection runs in the text projection, not in the DiT
    ff_bias: tuple[bool, bool]  # (video, audio) feed-forwards with biases (`ff_bias` / `audio_ff_bias`, 2.5: none)
    prompt_adaln: bool  # the text K/V modulated by sigma (`use_prompt_adaln_single`); off: the same every step
    # not in any metadata: ltx-core 1.2.0 (2.5's reference) modulates the audio<->video cross-attention's scale/shift
    # by each stream's own per-token timesteps, 1.0.0 (2.0, 2.3) by the other stream's sigma
    own_timestep_cross_modulation: bool
    # not in any metadata: a stream held exactly over the whole clip (sound for a video) is fed sigma 0 by
    # ltx-pipelines 1.2.0 (its frozen modality; 2.5's reference), the step's sigma by 1.0.0 (2.0, 2.3: a held latent)
    frozen_sigma_zero: bool
    # the Lightricks pipelines the release's runs follow where their two versions differ (docs/references.md): 1.0.0
    # for 2.0 and 2.3 (published with those checkpoints, the one on PyPI), 1.2.0 for 2.5 (the only one that runs it)
    reference: str
    # 1.2.0's TI2VidTwoStagesPipeline: the two-stage refinement samples the audio too (the video attends to it) but
    # the run returns stage 1's ("Stage 2 refines video only; discard its audio"); 1.0.0 returns stage 2's
    two_stage_keeps_stage1_audio: bool
    # 1.2.0's noiser blends from the state's own latent, not the conditions' tokens: held tokens (a frame-0 image)
    # start from the latent's own values, appended ones (keyframes, controls) from zeros, so a held token at
    # strength < 1 is noised toward its clean value only through the denoise mask; 1.0.0 noises the held tokens
    # themselves. The same wherever the noise scale is 1 or the strength 1
    noise_from_latent: bool
    # the time span, in pixel frames, of a single-image keyframe's tokens: [f, f + span) / fps (1.2.0: 1 pixel
    # frame; 1.0.0: a latent frame's 8)
    keyframe_frames: int
    # 1.2.0's frozen modalities at their spec's default noise scale (a retake's kept stream, sound for a video's
    # video) are noised at the stage's noise scale before they are frozen, so the transformer sees noise moving
    # toward the clip while told sigma 0; 1.0.0 holds them clean. (Audio-to-video's sound: scale 0 in both.)
    frozen_noised: bool
    # the H.264 CRF of the round trip an image condition takes unless it names one: what the model was trained
    # against (ltx_pipelines/utils/constants.py: 33; 1.2.0's LTX_2_4_PARAMS for 2.4 and later: 18)
    image_crf: int
    text_model_type: str  # the `model_type` of the text encoder whose hidden states the release's connectors take
    steps: int  # of the released one-stage / stage-1 schedule
    ancestral_distilled: bool  # the distilled pipeline's stage 1 takes ancestral Euler steps (η = 1)
    negative_prompt: str  # the pipelines' default negative prompt
    stg_blocks: tuple[int, ...]  # the blocks STG perturbs, for video and audio
    video_guidance: GuidanceScales
    audio_guidance: GuidanceScales
    sizes: ClipSizes  # the command line's default clip with a checkpoint
    demo_sizes: ClipSizes  # ... and with the tiny demo model of this structure

    def default_size(self, demo: bool, two_stage: bool) -> ClipSize:
        sizes = self.demo_sizes if demo else self.sizes
        return sizes.two_stage if two_stage else sizes.one_stage


# ltx_pipelines/utils/constants.py: the (video, audio) scales of every release (1.2.0 gives 2.5 those of 2.3)
_VIDEO = GuidanceScales(cfg=3.0, stg=1.0, rescale=0.7, modality=3.0)
_AUDIO = GuidanceScales(cfg=7.0, stg=1.0, rescale=0.7, modality=3.0)
# ltx_pipelines/utils/constants.py DEFAULT_NEGATIVE_PROMPT: 1.0.0's, and 1.2.0's (2.5) with five tags in front
_NEGATIVE_PROMPT = (
    "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, "
    "grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, "
    "deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, "
    "wrong hand count, artifacts around text, inconsistent perspective, camera shake, incorrect depth of "
    "field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent "
    "lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny "
    "valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, wrong gaze direction, "
    "mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, "
    "off-sync audio, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward "
    "pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, flat lighting, "
    "inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts."
)
_NEGATIVE_PROMPT_2_5 = ("has_subtitles, has_blurbox, transition from black, transition to black, speech_ending_short, "
                        + _NEGATIVE_PROMPT)
# where ltx-pipelines 1.0.0 and 1.2.0 differ (the fields' comments in `Release`)
_REFERENCE_100 = dict(reference="ltx-pipelines 1.0.0", two_stage_keeps_stage1_audio=False, noise_from_latent=False,
                      keyframe_frames=8, frozen_noised=False, image_crf=33)
_REFERENCE_120 = dict(reference="ltx-pipelines 1.2.0", two_stage_keeps_stage1_audio=True, noise_from_latent=True,
                      keyframe_frames=1, frozen_noised=True, image_crf=18)
_SIZES = ClipSizes(ClipSize(768, 512, 121), ClipSize(1536, 1024, 121))
_DEMO_SIZES = ClipSizes(ClipSize(96, 64, 17), ClipSize(128, 128, 17))

RELEASES: Mapping[ModelVersion, Release] = MappingProxyType({
    ModelVersion.V2_0: Release(
        ModelVersion.V2_0, "LTX-2", layers=48, heads=(32, 32), gated_attention=False, cross_attention_adaln=False,
        caption_before_connector=False, ff_bias=(True, True), prompt_adaln=True, own_timestep_cross_modulation=False,
        frozen_sigma_zero=False, **_REFERENCE_100, text_model_type="gemma3", steps=40, ancestral_distilled=False,
        negative_prompt=_NEGATIVE_PROMPT,
        stg_blocks=(29,), video_guidance=_VIDEO, audio_guidance=_AUDIO, sizes=_SIZES, demo_sizes=_DEMO_SIZES),
    ModelVersion.V2_3: Release(
        ModelVersion.V2_3, "LTX-2.3", layers=48, heads=(32, 32), gated_attention=True, cross_attention_adaln=True,
        caption_before_connector=True, ff_bias=(True, True), prompt_adaln=True, own_timestep_cross_modulation=False,
        frozen_sigma_zero=False, **_REFERENCE_100, text_model_type="gemma3", steps=30, ancestral_distilled=False,
        negative_prompt=_NEGATIVE_PROMPT,
        stg_blocks=(28,), video_guidance=_VIDEO, audio_guidance=_AUDIO, sizes=_SIZES, demo_sizes=_DEMO_SIZES),
    # the 22B structure of 2.3 without feed-forward biases ("LTX 2.5 (gemma4) sets ff_bias=false") and with text
    # K/V computed once per prompt (use_prompt_adaln_single false: the read from the released header is still to
    # come); its pipelines take 2.3's defaults (1.2.0's LTX_2_4_PARAMS), an ancestral distilled stage 1 and 1.2.0's
    # negative prompt
    ModelVersion.V2_5: Release(
        ModelVersion.V2_5, "LTX-2.5", layers=48, heads=(32, 32), gated_attention=True, cross_attention_adaln=True,
        caption_before_connector=True, ff_bias=(False, False), prompt_adaln=False, own_timestep_cross_modulation=True,
        frozen_sigma_zero=True, **_REFERENCE_120, text_model_type="gemma4_unified", steps=30, ancestral_distilled=True,
        negative_prompt=_NEGATIVE_PROMPT_2_5,
        stg_blocks=(28,), video_guidance=_VIDEO, audio_guidance=_AUDIO, sizes=_SIZES, demo_sizes=_DEMO_SIZES),
})



class HqPreset(NamedTuple):
    """The HQ two-stage pipeline's settings (`--mode two-stage-hq`): ltx-pipelines 1.2.0's LTX_2_3_HQ_PARAMS and
    `hq_2_stage_arg_parser`, one constant for every release, as the reference ("it overrides every knob"): res_2s
    steps, guidance without STG (3 passes), the distilled LoRA at one strength per stage. The clip size stays the
    user's (the reference's preset asks 1920x1088)."""

    steps: int
    video_guidance: GuidanceScales
    audio_guidance: GuidanceScales
    lora_strengths: tuple[float, float]  # the distilled LoRA's, (stage 1, stage 2)


HQ_PRESET = HqPreset(steps=15, video_guidance=GuidanceScales(cfg=3.0, stg=0.0, rescale=0.45, modality=3.0),
                     audio_guidance=GuidanceScales(cfg=7.0, stg=0.0, rescale=1.0, modality=3.0),
                     lora_strengths=(0.25, 0.5))

# the released text connectors' head width and RoPE maximum position (every release; the `transformer` section's
# `connector_attention_head_dim` and `connector_positional_embedding_max_pos`), for files that do not say them
RELEASED_CONNECTOR_HEAD_DIM = 128
RELEASED_CONNECTOR_MAX_POS = 4096

# the release where none is named: the demo model's structure, the guidance node's widget values
DEFAULT_VERSION = ModelVersion.V2_0

# every head count of a released model: the layout checks made before a model is chosen (the parallelism widget)
RELEASED_HEADS: tuple[int, ...] = tuple(dict.fromkeys(h for r in RELEASES.values() for h in r.heads))

# the released step counts, as help texts give them: "40 for LTX-2, 30 for LTX-2.3, 30 for LTX-2.5"
RELEASED_STEPS = ", ".join(f"{r.steps} for {r.name}" for r in RELEASES.values())

_VERSION_RE = re.compile(r"^(\d+\.\d+)(?:\D.*)?$")  # '2.3', '2.3.0', '2.3.1-distilled' -> '2.3'


def parse_version(value: str) -> ModelVersion:
    """The release a checkpoint's `model_version` metadata string names (UnknownModelVersionError otherwise)."""
    match = _VERSION_RE.match(value.strip())
    if match and match.group(1) in RELEASES:
        return ModelVersion(match.group(1))
    supported = " and ".join(f"LTX-{v.value} ('{v.value}…')" for v in RELEASES)
    raise UnknownModelVersionError(
        f"unknown model_version {value!r} in the checkpoint metadata; supported: {supported}. Use an official "
        f"{' / '.join(r.name for r in RELEASES.values())} checkpoint, or pass an explicit TransformerConfig."
    )
