"""The reference side of tests/parity/test_duration_head_parity.py: ltx-core 1.2.0's DurationHead built by its own
configurator from the test's metadata, loaded with the test's tensors through its own key ops, run on the test's
contexts (video and audio, each alone); and ltx-pipelines' frame count for each length."""

import json

import torch
from exchange import inputs, outputs
from ltx_core.duration_head import DURATION_HEAD_KEY_OPS, DurationHeadConfigurator
from ltx_pipelines.utils.helpers import seconds_to_clamped_num_frames

t, settings = inputs()
head = DurationHeadConfigurator.from_metadata({"config": json.loads(settings["config"])})
state = {}
for key, value in t.items():
    if key.startswith("duration_head."):
        state[DURATION_HEAD_KEY_OPS.apply_to_key(key)] = value
head.load_state_dict(state, strict=True)
head.eval()
result = {"both": head(t["video"], t["audio"]), "video": head(t["video"], None), "audio": head(None, t["audio"])}
frames = [seconds_to_clamped_num_frames(s, frame_rate=fps, min_frames=round(lo * fps), max_frames=round(hi * fps))
          for s, fps, lo, hi in settings["lengths"]]
outputs({**result, "frames": torch.tensor(frames)})
