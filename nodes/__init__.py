"""ComfyUI node classes of the pack: thin wrappers over ltx2_core (V1 API, so the pack imports without ComfyUI)."""

import os

from . import bridge

from .audio import LTX2AudioCondition
from .decode import LTX2Decode, LTX2LatentUpsample
from .dfr import LTX2DFR
from .dub import LTX2Dub
from .duration import LTX2PredictLength
from .generate import LTX2Generate
from .hdr import LTX2HDR, LTX2SaveEXR
from .images import LTX2ImageCondition
from .long_video import LTX2GenerateLong
from .loaders import (LTX2CheckpointLoader, LTX2LoraLoader, LTX2ModelLoader, LTX2TextEncoderLoader,
                      LTX2UpsamplerLoader)
from .native_sampler import LTX2SamplerCustomAdvanced
from .parallel import LTX2ParallelConfig
from .sampling import LTX2EmptyLatent, LTX2Guidance, LTX2Sampler
from .step_cache import LTX2StepCache
from .text import LTX2TextEncode
from .video import LTX2Retake, LTX2VideoGuide

NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {
    "LTX2CheckpointLoader": "LTX-2 Checkpoint Loader",
    "LTX2ModelLoader": "LTX-2 Model Loader (separate files)",
    "LTX2TextEncoderLoader": "LTX-2 Text Encoder Loader (Gemma)",
    "LTX2LoraLoader": "LTX-2 LoRA Loader",
    "LTX2UpsamplerLoader": "LTX-2 Latent Upsampler Loader",
    "LTX2TextEncode": "LTX-2 Text Encode",
    "LTX2EmptyLatent": "LTX-2 Empty Latent (video + audio)",
    "LTX2Guidance": "LTX-2 Guidance",
    "LTX2Sampler": "LTX-2 Sampler",
    "LTX2LatentUpsample": "LTX-2 Latent Upsample x2",
    "LTX2Decode": "LTX-2 Decode (video + audio)",
    "LTX2Generate": "LTX-2 Generate (text to video + audio)",
    "LTX2ParallelConfig": "LTX-2 Multi-GPU Layout",
    "LTX2ImageCondition": "LTX-2 Image Condition (first / last / any frame)",
    "LTX2AudioCondition": "LTX-2 Audio Condition (video to a sound)",
    "LTX2VideoGuide": "LTX-2 Video Guide (IC-LoRA control)",
    "LTX2Retake": "LTX-2 Retake (regenerate a span of a clip)",
    "LTX2GenerateLong": "LTX-2 Long Video (windows with sound)",
    "LTX2SamplerCustomAdvanced": "LTX-2 SamplerCustomAdvanced (fast)",
    "LTX2StepCache": "LTX-2 Step Cache (EasyCache)",
    "LTX2Dub": "LTX-2 Dub (Dub-It)",
    "LTX2HDR": "LTX-2 HDR (IC-LoRA)",
    "LTX2SaveEXR": "LTX-2 Save EXR",
    "LTX2PredictLength": "LTX-2 Predict Length (duration head)",
    "LTX2DFR": "LTX-2 DFR (long clip)",
}
NODE_CLASS_MAPPINGS: dict[str, type] = {
    node.__name__: node
    for node in (LTX2CheckpointLoader, LTX2ModelLoader, LTX2TextEncoderLoader, LTX2LoraLoader, LTX2UpsamplerLoader,
                 LTX2TextEncode, LTX2EmptyLatent, LTX2Guidance, LTX2Sampler, LTX2LatentUpsample, LTX2Decode,
                 LTX2Generate, LTX2ParallelConfig, LTX2ImageCondition, LTX2AudioCondition,
                 LTX2VideoGuide, LTX2Retake, LTX2GenerateLong, LTX2SamplerCustomAdvanced, LTX2StepCache,
                 LTX2Dub, LTX2HDR, LTX2SaveEXR, LTX2PredictLength, LTX2DFR)
}

# the pictures and sounds the examples load (LoadImage and LoadAudio read ComfyUI's input folder)
EXAMPLE_INPUTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "example_workflows", "input")
bridge.provide_inputs(EXAMPLE_INPUTS)
