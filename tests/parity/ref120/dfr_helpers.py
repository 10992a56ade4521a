"""The reference side of tests/unit/test_dfr_helpers.py: ltx-pipelines 1.2.0's DFRPipeline helpers on the test's
latents: the slot seeds from the nearest video latent frame and the keyframes carried to the next round."""

import torch
from exchange import inputs, outputs
from ltx_pipelines.dfr_pipeline import _merge_carry_forward_keyframes, _slot_initials_from_video

t, settings = inputs()
result = {"seeds": _slot_initials_from_video(t["video"], settings["slot_frames"], 8)}
frames, latents = _merge_carry_forward_keyframes(settings["anchor_frames"], t["anchors"], settings["slot_frames2"],
                                                 t["slots"])
outputs({**result, "carried_frames": torch.tensor(frames), "carried": latents})
