"""Quantised weights, one home: `format` (the `WeightFormat` protocol every format implements: detect, load,
dequantise, bytes, tensor-parallel split, LoRA rule), one module per format (`fp8`, `nvfp4`, `int8`, `mxfp8`),
`kitchen` (comfy-kitchen, ComfyUI's kernel library, which the formats compute through), `registry` (the formats that
load, and the questions asked of all of them), `files` (which layers of a file are in which format, from its header)
and `policy` (which linears are quantised, the user's fp8 setting). A new format is one module plus one line in
`registry.FORMATS`."""
