"""Conditions applied to the video or audio stream state of a sampling stage (images held at frames, ...)."""
