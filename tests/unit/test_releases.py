"""The release table: every entry complete and consistent with the released configs, and the places that once wrote
per-version values themselves now read them from it."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from ltx2_core.__main__ import build_request, parse_args
from ltx2_core.demo import DEMO_VAES, DEMO_VOCODERS
from ltx2_core.demo.decoders import DEMO_RATIONAL_UPSAMPLERS
from ltx2_core.errors import UnknownModelVersionError
from ltx2_core.geometry import is_video_size
from ltx2_core.model.transformer.config import TransformerConfig, parse_model_version
from ltx2_core.parallel.config import default_layout
from ltx2_core.releases import DEFAULT_VERSION, RELEASED_HEADS, RELEASES, ModelVersion, parse_version
from ltx2_core.sampling.guidance import default_guidance, default_steps
from nodes import parallel as nodes_parallel
from support.configs import released_transformer_configs

RELEASED = released_transformer_configs()
VERSIONS = list(RELEASES)


def test_the_table_has_one_release_per_version():
    assert list(RELEASES) == list(ModelVersion) and DEFAULT_VERSION in RELEASES
    assert all(release.version is version for version, release in RELEASES.items())
    assert set(RELEASED) == {version.value for version in ModelVersion}  # the support configs cover every release


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_every_release_is_complete(version):
    release = RELEASES[version]
    for field in dataclasses.fields(release):
        value = getattr(release, field.name)
        assert value is not None and value != (), field.name
    assert release.steps > 0 and release.layers > 0 and len(release.heads) == 2
    for scales in (release.video_guidance, release.audio_guidance):
        assert all(scale >= 0 for scale in scales)
    for sizes in (release.sizes, release.demo_sizes):
        assert all(is_video_size(clip.frames, clip.height, clip.width) for clip in sizes)
        assert sizes.two_stage.width % 64 == 0 and sizes.two_stage.height % 64 == 0  # halved for stage 1


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_every_release_matches_its_released_transformer(version):
    release, config = RELEASES[version], RELEASED[version.value]
    assert config.version is version
    assert (config.num_layers, (config.video.heads, config.audio.heads)) == (release.layers, release.heads)
    assert all(0 <= block < config.num_layers for block in release.stg_blocks)
    def flags(c: TransformerConfig) -> tuple:
        return (c.gated_attention, c.cross_attention_adaln, c.caption_channels is None, (c.ff_bias, c.audio_ff_bias),
                c.prompt_adaln, c.own_timestep_cross_modulation)

    assert flags(config) == (release.gated_attention, release.cross_attention_adaln, release.caption_before_connector,
                             release.ff_bias, release.prompt_adaln, release.own_timestep_cross_modulation)
    assert flags(TransformerConfig.tiny(version)) == flags(config)  # the test / demo transformer: the same structure


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_guidance_and_steps_come_from_the_table(version):
    release = RELEASES[version]
    assert default_steps(version) == release.steps
    video, audio = default_guidance(version)
    assert (video.cfg, video.stg, video.rescale, video.modality) == release.video_guidance
    assert (audio.cfg, audio.stg, audio.rescale, audio.modality) == release.audio_guidance
    assert video.stg_blocks == audio.stg_blocks == release.stg_blocks
    assert default_guidance(version, 3)[0].stg_blocks == (2,)  # a shallow model perturbs its last block


def test_version_strings_are_read_through_the_table():
    for version in VERSIONS:
        assert parse_version(f" {version.value}.1-distilled ") is version
        assert parse_model_version(version.value + ".0", {}) is version
    with pytest.raises(UnknownModelVersionError) as info:
        parse_version("2.9.0")
    message = str(info.value)
    assert all(f"LTX-{v.value} ('{v.value}…')" in message and RELEASES[v].name in message for v in VERSIONS)


def test_the_heads_every_layout_check_assumes_are_the_releases():
    assert set(RELEASED_HEADS) == {heads for release in RELEASES.values() for heads in release.heads}
    assert inspect.signature(default_layout).parameters["heads"].default == RELEASED_HEADS
    assert nodes_parallel.RELEASED_HEADS is RELEASED_HEADS
    widget = (Path(__file__).parents[2] / "web" / "ltx2_parallel_logic.js").read_text()
    heads = re.search(r"DEFAULT_HEADS = \[(\d+), (\d+)\]", widget)
    assert {int(heads[1]), int(heads[2])} == set(RELEASED_HEADS)  # the widget cannot import Python: same values


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_demo_structures_exist_for_every_release(version):
    assert version in DEMO_VAES and version in DEMO_VOCODERS and version in DEMO_RATIONAL_UPSAMPLERS


@pytest.mark.parametrize("mode", ["one-stage", "two-stage"])
@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_command_line_sizes_come_from_the_table(version, mode):
    request = build_request(parse_args(["--version", version.value, "--mode", mode]))
    clip = RELEASES[version].default_size(demo=True, two_stage=mode != "one-stage")
    assert (request.width, request.height, request.frames) == clip


def test_checkpoint_sizes_are_shared_by_every_release():
    """The command line picks a checkpoint's default size before it reads the file's release (the file checks
    come first): a release with other sizes must read them after those checks."""
    assert len({release.sizes for release in RELEASES.values()}) == 1
