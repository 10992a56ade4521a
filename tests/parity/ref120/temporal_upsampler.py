"""The reference side of tests/parity/test_upsampler_parity.py's 1.2.0 check: ltx-core 1.2.0's LatentUpsampler built
by its own configurator from the test's metadata, loaded with the test's weights, run on the test's latent alone and
through upsample_video with the test's per-channel statistics."""

import json
import types

from exchange import inputs, outputs
from ltx_core.model.upsampler import LatentUpsamplerConfigurator, upsample_video
from ltx_core.model.video_vae.ops import PerChannelStatistics

t, settings = inputs()
model = LatentUpsamplerConfigurator.from_metadata({"config": json.loads(settings["config"])}).eval()
model.load_state_dict({k[2:]: v for k, v in t.items() if k.startswith("w.")}, strict=True)
stats = PerChannelStatistics(t["latent"].shape[1])
stats.load_state_dict({k[2:]: v for k, v in t.items() if k.startswith("s.")}, strict=True)
encoder = types.SimpleNamespace(per_channel_statistics=stats)
outputs({"forward": model(t["latent"]), "upsampled": upsample_video(t["latent"], encoder, model)})
