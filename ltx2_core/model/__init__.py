"""Model components of LTX-2, each with the checkpoint's parameter names."""
