"""Quantised weight formats (fp8, NVFP4): detection from file headers, the layers, the policy."""
