"""The command line's options (`python -m ltx2_core generate --help`): the parser alone, with the description and
examples users read, its values read by `cli_values`; `ltx2_core.__main__` turns them into a request and runs it."""

from __future__ import annotations

import argparse

import torch

from ltx2_core import cli_values as values
from ltx2_core.conditioning.images import DEFAULT_IMAGE_CRF
from ltx2_core.quant.fp8_matmul import CHOICES as FP8_MATMUL_CHOICES
from ltx2_core.model.transformer.attention_select import MODES as ATTENTION_MODES
from ltx2_core.quant.policy import FP8_MODES
from ltx2_core.releases import DEFAULT_VERSION, RELEASED_STEPS, RELEASES
from ltx2_core.request import DEFAULT_NEGATIVE_PROMPT
from ltx2_core.request_checks import MODES
from ltx2_core.sampling.stage import SAMPLERS
from ltx2_core.windows import DEFAULT_OVERLAP, DEFAULT_WINDOW

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEFAULT_PROMPT = "A cat walks along the beach at sunset while waves roll in."
DESCRIPTION = """\
Generate a video with its sound (an MP4: H.264 video, AAC stereo sound) from a text prompt with Lightricks' LTX-2,
LTX-2.3 or LTX-2.5; or the sound alone (--audio-only), the sound of a silent video (--video), a video guided by
images, a sound or a control video, part of a video retaken (--retake), or a long clip (--duration).

Without --checkpoint a tiny random-weight DEMO model runs (its video and sound are noise of the requested size and
length), so the whole path can be tried on any machine. With --checkpoint it runs the released files: an LTX-2 /
LTX-2.3 checkpoint with --text-encoder; LTX-2.5's transformer with --text-encoder, --vae and --audio-vae, or
ComfyUI's models folder holding them; a GGUF transformer with the files it lacks.

Every argument and file is checked before any model loads: a bad one ends the run with exit status 2 and the fix."""
EXAMPLES = """\
examples:
  python -m ltx2_core generate --output demo.mp4
  python -m ltx2_core generate --checkpoint ltx-2.3-22b-dev.safetensors --text-encoder gemma_3_12B_it.safetensors \\
      --prompt "A cat walks along the beach at sunset." --device cuda --dtype bfloat16 --output cat.mp4
  python -m ltx2_core generate --checkpoint ComfyUI/models --vae ComfyUI/models/vae/ltx-2.5-video-vae-bf16.safetensors \\
      --mode distilled --prompt "A cat walks along the beach at sunset." --output cat25.mp4"""


def _size_help(axis: int, what: str) -> str:
    """`what` and the defaults of one clip size (0 width, 1 height, 2 frames): with a checkpoint and with the demo,
    by mode (every release has the same sizes so far)."""
    release = RELEASES[DEFAULT_VERSION]

    def by_mode(demo: bool) -> str:
        one, two = (release.default_size(demo, two_stage)[axis] for two_stage in (False, True))
        return f"{one}" if one == two else f"{one}, two-stage and distilled {two}"

    return f"{what} (default {by_mode(False)}; the demo model {by_mode(True)})"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The options of `argv`, with the default --output of the run (a .wav for --audio-only)."""
    args = parser().parse_args(argv)
    if args.output is None:
        args.output = ("ltx2_output.wav" if args.audio_only else "ltx2_hdr" if args.hdr is not None
                       else "ltx2_output.mp4")
    return args


def parser() -> argparse.ArgumentParser:
    """The command line's parser: every option with its help text."""
    p = argparse.ArgumentParser(prog="python -m ltx2_core generate", description=DESCRIPTION, epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt", default=DEFAULT_PROMPT,
                   help="what the video and its sound show: the scene, the action, the sound, any speech (default: "
                        f"\"{DEFAULT_PROMPT}\")")
    p.add_argument("--negative-prompt", help="default: the release's (LTX-2.5 adds five tags in front of "
                   f"LTX-2's and 2.3's: {DEFAULT_NEGATIVE_PROMPT[:40]}…)")
    p.add_argument("--mode", choices=MODES, default="one-stage",
                   help="one-stage (default): the full size sampled with the full guidance; two-stage: half size "
                        "first, then x2 upsampling and 3 refinement steps with the distilled LoRA (needs --upsampler "
                        "and --distilled-lora); distilled: a distilled checkpoint, 8 + 3 steps, no guidance (needs "
                        "--upsampler); two-stage-hq: two-stage with the res_2s sampler, 15 steps, the HQ guidance "
                        "and the distilled LoRA in both stages (0.25, 0.5; needs --upsampler and --distilled-lora); "
                        "keyframes: two-stage interpolating between two or more --image keyframes, each appended at "
                        "its frame, frame 0 too (Lightricks' KeyframeInterpolationPipeline)")
    p.add_argument("--sampler", choices=SAMPLERS,
                   help="euler or res_2s (second order, two predictions per step; not with --mode distilled, "
                        "--cache or --cuda-graphs on) in every stage (default: res_2s for --mode two-stage-hq, euler "
                        "otherwise)")
    p.add_argument("--width", type=int, help=_size_help(0, "pixels, a multiple of 32 (64 for two-stage and distilled)"))
    p.add_argument("--height", type=int, help=_size_help(1, "pixels, a multiple of 32 (64 for two-stage and "
                                                            "distilled)"))
    p.add_argument("--frames", type=values.frames, help=_size_help(2, "pixel frames, 8k+1; or auto: the length "
                                                                      "LTX-2.5's duration head predicts from the "
                                                                      "prompt, within --auto-duration"))
    p.add_argument("--auto-duration", type=float, nargs=2, metavar=("MIN", "MAX"),
                   help="with --frames auto (implies it): the predicted length clamped to MIN..MAX seconds (default "
                        "1 20, as Lightricks' pipelines); text to audio (--audio-only) and the video modes")
    p.add_argument("--fps", type=float, help="frames per second (default 24; with --video and --retake: the file's)")
    p.add_argument("--steps", type=int, help=f"stage-1 steps (default: the release's, {RELEASED_STEPS}); not with "
                                             "--mode distilled, whose 8-step schedule is fixed")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0): the same seed, files and "
                                                       "options give the same result on the same device")
    p.add_argument("--enhance-prompt", action="store_true",
                   help="rewrite the prompt with the loaded Gemma first (Lightricks' prompt enhancement, seeded by "
                        "--seed; printed as \"enhanced prompt: ...\"); its system prompt comes from an installed "
                        "ltx-core (pip install --no-deps ltx-core==1.0.0) or --system-prompt")
    p.add_argument("--system-prompt", metavar="FILE",
                   help="with --enhance-prompt: a text file holding the system prompt (default: Lightricks')")
    g = p.add_argument_group("guidance (default: the release's values; cfg/modality 1 and stg/rescale 0 switch off)")
    for flag, help_text in (("cfg", "classifier-free guidance scale"), ("stg", "spatio-temporal guidance scale"),
                            ("rescale", "rescale of the guided prediction (0..1)"),
                            ("modality", "modality-isolation (a2v / v2a) guidance scale")):
        g.add_argument(f"--{flag}", type=float, help=f"video {help_text}")
        g.add_argument(f"--audio-{flag}", type=float, help=f"audio {help_text}")
    g.add_argument("--stg-blocks", type=values.stg_blocks, help="video STG blocks, e.g. 29 or 28,29")
    g.add_argument("--audio-stg-blocks", type=values.stg_blocks, help="audio STG blocks")
    m = p.add_argument_group("model files (default: the tiny random-weight demo model)")
    m.add_argument("--checkpoint", help="official LTX-2 / LTX-2.3 .safetensors (dev; distilled for --mode "
                   "distilled); or LTX-2.5's transformer ltx-2.5-22b-{dev,distilled}-transformer-bf16.safetensors "
                   "(with --text-encoder, --vae, --audio-vae); or an LTX-2 / 2.3 / 2.5 transformer GGUF (ComfyUI-GGUF's "
                   "conversions; with --text-encoder, --vae, --audio-vae and, unless it holds them, --text-projection); or a folder holding LTX-2.5's files (ComfyUI's models "
                   "folder with diffusion_models/ text_encoders/ vae/ latent_upscale_models/ loras/, or one flat "
                   "folder): each file found by its header, the flags below pick where it holds two")
    m.add_argument("--text-encoder", help="Gemma 3 12B for LTX-2 / 2.3: gemma_3_12B_it*.safetensors or a Hugging "
                   "Face folder; LTX-2.5: gemma4-12b-with-proj-ltx-2.5-bf16.safetensors")
    m.add_argument("--vae", help="LTX-2.5's video VAE: ltx-2.5-video-vae-bf16.safetensors (the diffusion decoder, the "
                   "release's default quality) or ltx-2.5-video-vae-conv-bf16.safetensors (the convolutional decoder: "
                   "faster, less memory; its encoder also serves --image); with an LTX-2 / 2.3 checkpoint it replaces "
                   "the bundled video VAE")
    m.add_argument("--audio-vae", help="LTX-2.5's audio VAE and vocoder: ltx-2.5-audio-vae-bf16.safetensors; with an "
                   "LTX-2 / 2.3 checkpoint it replaces the bundled ones")
    m.add_argument("--text-projection", help="LTX-2 / 2.3 with a GGUF or separate transformer: the text projection and "
                   "connectors, e.g. ComfyUI's ltx-2*-embeddings_connector*.safetensors, or the official checkpoint "
                   "(LTX-2.5: only when the transformer file lacks the connectors)")
    m.add_argument("--upsampler", help="ltx-2-spatial-upscaler-x2-*.safetensors, LTX-2.5: ltx-2.5-latent-spatial-"
                   "upscaler-x2-bf16-1.0.safetensors (two-stage, distilled)")
    m.add_argument("--distilled-lora", help="ltx-2-*-distilled-lora-*.safetensors, LTX-2.5: ltx-2.5-22b-distilled-"
                   "lora-450-bf16.safetensors (two-stage)")
    m.add_argument("--duration-head", metavar="FILE",
                   help="LTX-2.5's duration head (--frames auto) in a file of its own; default: the transformer "
                        "file's duration_head.* tensors, or the one duration head file beside it in a models folder "
                        "(the released file is not public yet)")
    m.add_argument("--lora", action="append", default=[], type=values.lora, metavar="PATH[:STRENGTH]",
                   help="a LoRA to fuse (repeatable; strength default 1)")
    m.add_argument("--version", choices=[v.value for v in RELEASES],
                   help=f"the release whose structure the demo model has (default {DEFAULT_VERSION.value}); with "
                        "--checkpoint the release is the file's (read from its header), and another --version is "
                        "refused")
    p.add_argument("--image", action="append", default=[], type=values.image, metavar="PATH[:FRAME[:STRENGTH[:CRF]]]",
                   help="an image held at pixel frame FRAME (default 0: image-to-video; -1: the last frame; others "
                        "are keyframes) with STRENGTH (default 1) after an H.264 round trip at CRF (default: the "
                        f"model's, {DEFAULT_IMAGE_CRF} for LTX-2 / 2.3 and 18 for 2.5; 0: none); repeatable")
    p.add_argument("--audio", type=values.audio, metavar="PATH[:START[:STRENGTH]]",
                   help="audio-to-video: the sound (any audio file, or a video file's sound track) from START seconds "
                        "(default 0) for the clip's length, held with STRENGTH (default 1: exactly, as Lightricks' "
                        "pipeline); the mp4 carries this sound, not a re-decoded copy")
    p.add_argument("--video", metavar="PATH",
                   help="sound for a silent video: width, height, frames and fps are taken from the file (sizes "
                        "multiples of 32, 8k+1 ≥ 9 frames), its frames held while the sound is generated; --mode "
                        "one-stage (guided) or distilled (8 steps, one stage)")
    p.add_argument("--control", action="append", default=[], type=values.control, metavar=values.CONTROL_FORM,
                   help="IC-LoRA control: a depth, pose or edge video (its first --frames frames) guiding the "
                        "generation with STRENGTH (default 1: its tokens kept clean), through the IC-LoRA given with "
                        "--lora (encoded at the size its reference_downscale_factor asks for; two-stage: in stage 1, "
                        "the IC-LoRA fused for stage 1 only); ATTENTION (default 1) weighs the attention between the "
                        "control and the video (0: none), times MASK, a grayscale video (black 0, white 1; its "
                        "first --frames frames) of where the control applies; repeatable")
    p.add_argument("--retake", type=values.span, metavar="PATH:START:END",
                   help="regenerate [START, END) seconds of a video (its frames and its sound, if any) with the "
                        "prompt and keep the rest: the clip is the file's (sizes multiples of 32, 8k+1 ≥ 9 frames); "
                        "--mode one-stage (guided) or distilled (8 steps, one stage)")
    p.add_argument("--dub", nargs="+", metavar="CLIP [STRENGTH]",
                   help="Dub-It: re-voice CLIP (a video with sound) with the prompt, as Lightricks' DubItPipeline: its "
                        "first 8k+1 frames at its fps, at --width x --height (multiples of 64); its frames guide the "
                        "video through the Dub-It IC-LoRA given with --lora (fused in both stages) with STRENGTH "
                        "(default 1: kept clean), its whole sound is the audio reference; the distilled pipeline "
                        "(a distilled checkpoint and --upsampler)")
    p.add_argument("--keep-video", action="store_true", help="with --retake: keep the video whole (only the sound "
                   "of the span is regenerated)")
    p.add_argument("--keep-audio", action="store_true", help="with --retake: keep the sound whole (only the frames "
                   "of the span are regenerated)")
    p.add_argument("--replace-sound", action="store_true",
                   help="with --video: accept a file that already has sound (the generated sound replaces it)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the models run: cuda, cuda:N or cpu (default: cuda when a GPU is visible, else cpu)")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="default: float32 demo / the file's dtype")
    p.add_argument("--fp8", choices=FP8_MODES, default="auto",
                   help="transformer weights: auto keeps an fp8 file in fp8 and a bf16 file in --dtype; quantize: a "
                        "bf16 file's block linears to fp8 at load; dequantize: an fp8 file to --dtype")
    p.add_argument("--fp8-matmul", choices=FP8_MATMUL_CHOICES, default="auto",
                   help="how fp8 weights multiply: auto (by the GPU: fp8 tensor cores with a fused quantiser on "
                        "compute capability 8.9+, else dequantize); tensor / tensor-fused / kitchen (activations "
                        "scaled per tensor), row / row-fused (per token), dequantize (bf16 matmuls)")
    p.add_argument("--memory", choices=("auto", "resident", "stream"), default="auto",
                   help="auto: on CUDA (or with --memory-budget) plan what stays on the device from its free memory "
                        "and what is held in RAM, streaming the transformer blocks that do not fit; stream: every "
                        "block streamed (the least device memory); resident: everything on the device")
    p.add_argument("--memory-budget", type=float, metavar="GB",
                   help="plan for this much device memory instead of what is free (e.g. to leave room); under "
                        "torchrun: what each rank's text encoder may take (its layout: docs/several_gpus.md)")
    p.add_argument("--compile", action="store_true", help="torch.compile every transformer block (CUDA)")
    p.add_argument("--cuda-graphs", nargs="?", const="on", default="auto", choices=("auto", "on", "off"),
                   help="capture each denoising step as a CUDA graph: auto (default) where it can (CUDA, every block "
                        "resident, one GPU), on (the bare flag; refused where it cannot), off")
    p.add_argument("--passes-per-forward", type=values.positive_int,
                   help="guidance passes per transformer forward (default: the device's measured choice, all 4 in "
                        "one or one at a time at large sizes; 1 or 2 need less memory)")
    p.add_argument("--attention", choices=ATTENTION_MODES, default="auto",
                   help="the transformer's attention: auto (default) the fastest exact backend of the device; or one "
                        "by name: sdpa (PyTorch picks), math, flash, cudnn, efficient (SDPA's), flash4 (needs "
                        "flash-attn-4; H100/H200/B200), or 8-bit and approximate: sage (needs sageattention), "
                        "kitchen_int8 (comfy-kitchen's; CUDA); docs/attention.md")
    c = p.add_argument_group("step caching: reuse the transformer's output change on steps where the input barely "
                             "moved (ComfyUI's EasyCache decisions, per guidance pass, video and sound)")
    c.add_argument("--cache", choices=("none", "easycache"), default="none",
                   help="none (default): every step runs the transformer; easycache: skip steps as ComfyUI's EasyCache "
                        "node decides (every stage; one host read per step; not with --cuda-graphs on, --cfg-parallel "
                        "or --audio-only)")
    c.add_argument("--cache-threshold", type=values.non_negative,
                   help="EasyCache's reuse_threshold (default 0.2): higher skips more steps, with more error")
    c.add_argument("--cache-start", type=values.fraction,
                   help="fraction of the sampling before which no step is skipped (default 0.15)")
    c.add_argument("--cache-end", type=values.fraction,
                   help="fraction of the sampling after which no step is skipped (default 0.95)")
    d = p.add_argument_group("several GPUs: run under `torchrun --nproc-per-node N` with cfg-parallel·sp·tp = N")
    d.add_argument("--cfg-parallel", type=values.positive_int, default=1,
                   help="guidance passes spread over this many ranks (CFG-parallel; --cfg is the guidance scale)")
    d.add_argument("--sp", type=values.positive_int, default=1,
                   help="Ulysses sequence parallelism over the video tokens")
    d.add_argument("--tp", type=values.positive_int, default=1, help="tensor parallelism (divides the weights)")
    w = p.add_argument_group("long video: a clip longer than one window, as overlapping windows that continue each "
                             "other (video and sound)")
    w.add_argument("--duration", type=float, metavar="SECONDS",
                   help="the clip's length (instead of --frames): the fewest 8k+1 frames lasting SECONDS at --fps; "
                        "longer than one --window it is sampled window by window, each holding the previous one's "
                        "last --overlap frames of video and sound, and decoded as one clip")
    w.add_argument("--window", type=int, metavar="FRAMES",
                   help=f"pixel frames per window, 8k+1 ≥ 17 (default {DEFAULT_WINDOW}: 5 s at 24 fps; the "
                        "memory plan says how long a window the device allows)")
    w.add_argument("--overlap", type=int, metavar="FRAMES",
                   help=f"pixel frames neighbouring windows share, a multiple of 8 below the window by more than 8 "
                        f"(default {DEFAULT_OVERLAP}: 1 s at 24 fps)")
    w.add_argument("--window-prompt", action="append", default=[], metavar="TEXT",
                   help="the prompt of the next window (repeatable, in order; the last repeats for the rest; "
                        "default: --prompt for every window)")
    p.add_argument("--audio-only", action="store_true",
                   help="text to audio: the sound of --frames at --fps alone, no video (one-stage, one GPU); "
                        "written as .wav (default ltx2_output.wav), .flac, .m4a or .mp4 by --output's suffix")
    h = p.add_argument_group("HDR: an SDR video made HDR by the HDR IC-LoRA (--mode hdr is implied)")
    h.add_argument("--hdr", nargs="+", metavar=("VIDEO", "STRENGTH"),
                   help="the SDR video (Rec.709) and its guiding strength (default 1), with the HDR IC-LoRA as --lora "
                        "and a distilled --checkpoint (needs --upsampler); any --width/--height of at least 64 "
                        "(default: the video's); writes --output DIR/frame_00000.exr ... (linear Rec.709, half "
                        "float) and DIR/preview.mp4 (sRGB)")
    h.add_argument("--hdr-high-quality", action="store_true",
                   help="with --hdr: generate 2N-1 frames from each video frame twice and keep every other one "
                        "(smoother, about twice the time)")
    h.add_argument("--text-embeddings", metavar="FILE",
                   help="with --hdr: the prompt's contexts from a .safetensors of video_context and audio_context "
                        "(the reference's input) instead of encoding --prompt")
    d = p.add_argument_group("DFR: a long clip from a keyframe-slot transformer (--mode dfr)")
    d.add_argument("--temporal-rounds", type=int, choices=(0, 1, 2), metavar="R",
                   help="with --mode dfr: temporal x2 rounds (0, 1 or 2; default 0): (frames-1)*2^R+1 frames at "
                        "fps*2^R; needs --temporal-upsampler")
    d.add_argument("--temporal-upsampler", metavar="FILE",
                   help="with --mode dfr: DFR's temporal x2 latent upsampler (not public yet); a models folder's "
                        "latent_upscale_models is searched when --checkpoint is a folder")
    d.add_argument("--detailing-lora", type=values.lora, metavar="PATH[:STRENGTH]",
                   help="with --mode dfr: stage 2's x2 detailing IC-LoRA (its reference_downscale_factor from its "
                        "metadata, default 2); omit to refine without it")
    p.add_argument("--output", help="file to write: an mp4 (default ltx2_output.mp4); with --audio-only .wav, .flac, "
                                    ".m4a or .mp4; with --hdr a folder (default ltx2_hdr)")
    p.add_argument("--tensors", help="also write the decoded frames and waveform (float32) to this .safetensors")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p
