"""The reference side of tests/parity/test_audio_reference_parity.py: ltx-pipelines 1.2.0's
`patchify_dubit_audio_reference_latent(negative_positions=True)` on the test's reference latent, appended by ltx-core's
`AudioConditionByReferenceLatent` (per strength) to a toy audio state (`AudioLatentTools.create_initial_state` of the
test's clip latent); returns the state's fields."""

import torch
from exchange import inputs, outputs
from ltx_core.components.patchifiers import AudioPatchifier
from ltx_core.conditioning import AudioConditionByReferenceLatent
from ltx_core.tools import AudioLatentTools
from ltx_core.types import AudioLatentShape
from ltx_pipelines.dubit import patchify_dubit_audio_reference_latent

t, settings = inputs()
cpu = torch.device("cpu")
clip = t["clip"]
tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_torch_shape(clip.shape))
out = {}
for strength in settings["strengths"]:
    state = tools.create_initial_state(cpu, torch.float32, clip)
    patched, positions = patchify_dubit_audio_reference_latent(t["reference"], negative_positions=True, device=cpu)
    state = AudioConditionByReferenceLatent(patched, positions, strength=strength).apply_to(state, tools)
    name = f"s{strength}"
    out |= {f"{name}.latent": state.latent, f"{name}.clean": state.clean_latent, f"{name}.mask": state.denoise_mask,
            f"{name}.positions": state.positions}
    if state.attention_mask is not None:
        out[f"{name}.attention"] = state.attention_mask
outputs(out)
