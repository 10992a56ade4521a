"""Helpers shared by the tests: the reference implementation and synthetic checkpoints."""
