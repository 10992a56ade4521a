"""The reference side of tests/parity/test_transformer25_parity.py: ltx-core 1.2.0's LTXModel built by its own
builder from each tiny 2.5 transformer file the test wrote (LTXModelConfigurator + the `model.diffusion_model.` key
map, as `DiffusionStage.from_checkpoint` does), one forward per case: velocities of video and audio."""

import torch
from exchange import inputs, outputs
from ltx_core.guidance.perturbations import BatchedPerturbationConfig, Perturbation, PerturbationConfig
from ltx_core.guidance.perturbations import PerturbationType as T
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, Modality
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP

t, settings = inputs()


def load(path: str):
    builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=path,
                                    model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
    model = builder.build(device=torch.device("cpu"), dtype=torch.float32).eval()
    missing = [name for name, p in model.named_parameters() if p.is_meta]
    if missing:  # the loader is strict=False: a key the file misses would stay on meta
        raise SystemExit(f"{path}: weights missing from the file: {missing[:5]}")
    return model


def perturbation(kind: str, block: int) -> PerturbationConfig:
    if kind == "stg":
        return PerturbationConfig([Perturbation(T.SKIP_VIDEO_SELF_ATTN, [block]),
                                   Perturbation(T.SKIP_AUDIO_SELF_ATTN, [block])])
    if kind == "isolated":
        return PerturbationConfig([Perturbation(T.SKIP_A2V_CROSS_ATTN, None),
                                   Perturbation(T.SKIP_V2A_CROSS_ATTN, None)])
    return PerturbationConfig.empty()


out = {}
for name, path in settings["models"].items():
    model = load(path)
    for case, kinds in settings["cases"].items():
        c = {key: t[f"{case}.{key}"] for key in ("vlat", "alat", "vctx", "actx", "vsigma", "asigma", "vt", "at")}
        b = c["vlat"].shape[0]
        keyframes = t["keyframes"].expand(b, -1, -1) if settings["keyframes"][name] else None
        video = Modality(c["vlat"], c["vsigma"], c["vt"].unsqueeze(-1), t["vpos"].expand(b, -1, -1, -1), c["vctx"],
                         keyframes_mask=keyframes)
        audio = Modality(c["alat"], c["asigma"], c["at"].unsqueeze(-1), t["apos"].expand(b, -1, -1, -1), c["actx"])
        perturbations = BatchedPerturbationConfig([perturbation(k, settings["stg_block"]) for k in kinds],
                                                  model.num_blocks, torch.device("cpu"), torch.float32)
        out[f"{name}.{case}.video"], out[f"{name}.{case}.audio"] = model(video, audio, perturbations)
outputs(out)
