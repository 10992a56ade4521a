"""Our guided denoising step vs the reference's, same config and weights, same process.

One step = every guidance pass of the dev guider (cond, uncond, STG, modality-isolated), the multimodal guidance of
video and audio, the clean blend and the Euler update. Ours: `guided_step` (the passes as ONE batched forward,
per-run constants prepared once). Reference: ltx_pipelines' `multi_modal_guider_denoising_func` (four B=1 forwards)
+ `post_process_latent` + `EulerDiffusionStep`, i.e. one iteration of `euler_denoising_loop`. Also runs a whole
loop of `--steps` steps on both sides from the same noise and reports the final max difference, and counts host
syncs per step.

    python bench/denoise_step.py [--version 2.0] [--layers 4] [--frames 9] [--height 256] [--width 384]

Needs the references: pip install --no-deps ltx-core==1.0.0 ltx-pipelines==1.0.0 (plus einops scipy pillow tqdm).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from transformer_forward import Census, bench_arguments, bench_models, median_ms  # noqa: E402

from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions  # noqa: E402
from ltx2_core.sampling import (  # noqa: E402
    GuidanceParams, denoise, guided_setup, guided_step, ltx2_sigmas, noised_state,
)
from ltx2_core.types import TextEmbeddings  # noqa: E402
from support.reference import import_ltx_pipelines  # noqa: E402


def reference_loop(ref, positive, negative, video_guidance, audio_guidance, vpos, apos):
    """(one_step(video_state, audio_state, sigmas, i) -> states, run(video_state, audio_state, sigmas) -> states)"""
    import_ltx_pipelines()
    from dataclasses import replace

    from ltx_core.components.diffusion_steps import EulerDiffusionStep
    from ltx_core.components.guiders import MultiModalGuiderParams, create_multimodal_guider_factory
    from ltx_core.model.transformer import X0Model
    from ltx_pipelines.utils.helpers import multi_modal_guider_factory_denoising_func, post_process_latent
    from ltx_pipelines.utils.samplers import euler_denoising_loop

    def params(g: GuidanceParams) -> MultiModalGuiderParams:
        return MultiModalGuiderParams(cfg_scale=g.cfg, stg_scale=g.stg, stg_blocks=list(g.stg_blocks),
                                      rescale_scale=g.rescale, modality_scale=g.modality)

    denoise_fn = multi_modal_guider_factory_denoising_func(
        create_multimodal_guider_factory(params(video_guidance), negative_context=negative.video),
        create_multimodal_guider_factory(params(audio_guidance), negative_context=negative.audio),
        positive.video, positive.audio, X0Model(ref))
    stepper = EulerDiffusionStep()

    def one_step(video, audio, sigmas, i):
        dv, da = denoise_fn(video, audio, sigmas, i)
        dv = post_process_latent(dv, video.denoise_mask, video.clean_latent)
        da = post_process_latent(da, audio.denoise_mask, audio.clean_latent)
        return (replace(video, latent=stepper.step(video.latent, dv, sigmas, i)),
                replace(audio, latent=stepper.step(audio.latent, da, sigmas, i)))

    def run(video, audio, sigmas):
        return euler_denoising_loop(sigmas, video, audio, stepper, denoise_fn)

    return one_step, run


def reference_state(latent: torch.Tensor, positions: torch.Tensor):
    from ltx_core.types import LatentState

    mask = torch.ones(*latent.shape[:2], 1, device=latent.device)
    return LatentState(latent=latent, denoise_mask=mask, positions=positions, clean_latent=torch.zeros_like(latent))


def main() -> None:
    p = bench_arguments(__doc__)
    p.add_argument("--steps", type=int, default=4, help="steps of the compared loop")
    args = p.parse_args()
    torch.set_grad_enabled(False)
    config, ours, ref = bench_models(args)

    frames, rows, cols = (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32
    tv, ta = frames * rows * cols, audio_latent_length(args.frames, 24.0)
    vpos, apos = video_positions(frames, rows, cols, 24.0), audio_positions(ta)
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    positive, negative = (TextEmbeddings(*(torch.randn(1, args.text_tokens, w) for w in widths)) for _ in range(2))
    block = args.layers // 2
    video_guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(block,), rescale=0.7, modality=3.0)
    audio_guidance = GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(block,), rescale=0.7, modality=3.0)
    noise_video, noise_audio = torch.randn(1, tv, 128), torch.randn(1, ta, 128)
    sigmas = ltx2_sigmas(args.steps)

    setup = guided_setup(ours, positive, negative, vpos, apos, video_guidance, audio_guidance)
    video, audio = noised_state(torch.zeros_like(noise_video), noise_video), noised_state(
        torch.zeros_like(noise_audio), noise_audio)
    ref_step, ref_run = reference_loop(ref, positive, negative, video_guidance, audio_guidance, vpos, apos)
    ref_video = reference_state(noise_video.clone(), vpos.expand(1, -1, -1, -1))
    ref_audio = reference_state(noise_audio.clone(), apos.expand(1, -1, -1, -1))

    ours_ms = median_ms(lambda: guided_step(setup, video, audio, sigmas[0], sigmas[1]), args.repeats)
    ref_ms = median_ms(lambda: ref_step(ref_video, ref_audio, sigmas, 0), args.repeats)
    census_ours, census_ref = Census(), Census()
    with census_ours:
        guided_step(setup, video, audio, sigmas[0], sigmas[1])
    with census_ref:
        ref_step(ref_video, ref_audio, sigmas, 0)
    got = denoise(setup, video, audio, sigmas)
    want = ref_run(ref_video, ref_audio, sigmas)
    diff = max((got[0].latent - want[0].latent).abs().max().item(), (got[1].latent - want[1].latent).abs().max().item())

    print(f"config: LTX-{args.version} structure, {args.layers} blocks, video 4x128, audio 4x64; {tv} video + {ta} "
          f"audio tokens, {args.text_tokens} text tokens; threads {torch.get_num_threads()}")
    print(f"guided step (4 passes + guidance + Euler): ours {ours_ms:.1f} ms | reference {ref_ms:.1f} ms | "
          f"ratio {ref_ms / ours_ms:.2f}x")
    print(f"host syncs per step: ours {census_ours.syncs} | reference {census_ref.syncs}; ATen ops per step: ours "
          f"{census_ours.ops} | reference {census_ref.ops} ({census_ref.ops / census_ours.ops:.2f}x)")
    print(f"{args.steps}-step loop from the same noise: final max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()
