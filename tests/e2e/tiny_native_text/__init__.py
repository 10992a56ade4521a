"""TEST-ONLY custom node folder, linked into the e2e server's custom_nodes by tests/e2e/conftest.py (never part of
the pack): it sets the sizes ComfyUI 0.26.0 hard-codes for its own LTX-2 text path (Gemma 3 12B, the 3840·49
projection) to the tiny test model's, with native_text_encode.py's `tiny_sizes`, so workflows in the test server
run ComfyUI's real LTXAVTextEncoderLoader + CLIPTextEncode on the tiny Gemma file. The sizes come from the
LTX2_TINY_NATIVE_SIZES environment variable (JSON) the conftest sets; without it nothing is changed. No nodes."""

import json
import os
import sys

_SIZES = os.environ.get("LTX2_TINY_NATIVE_SIZES")
if _SIZES:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # tests/e2e
    from native_text_encode import tiny_sizes

    tiny_sizes(json.loads(_SIZES))

NODE_CLASS_MAPPINGS: dict = {}
