"""A whole generation from a GGUF transformer (ComfyUI-GGUF's layout) with its split files: the text connectors read
from the GGUF (dequantised) or from the text projection file, the projection from that file (2.0 / 2.3) or the Gemma 4
file (2.5), the text path sized from shapes where no file has its config. The frames equal the run of the same
weights dequantised into a safetensors model; what is missing is refused before any model work, naming the file."""

from __future__ import annotations

import av
import pytest
import torch

pytest.importorskip("gguf")

from safetensors.torch import load_file, save_file
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_2_5, released_transformer_configs
from support.gguf_files import PREFIX, write_gguf_model

from ltx2_core import ModelFiles, TransformerConfig
from ltx2_core.__main__ import main
from ltx2_core.errors import CheckpointError, ConfigError
from ltx2_core.loader import sources as sources_module
from ltx2_core.loader.sources import Component, Source, Sources
from ltx2_core.loader.text_shapes import text_config_from_shapes
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.projection import TextProjection

SIZE = ["--width", "64", "--height", "64", "--frames", "9"]
RUN = ["generate", "--prompt", "a red car", *SIZE, "--steps", "2", "--dtype", "float32", "--no-progress"]


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    from support.gemma import write_comfyui_file

    return write_comfyui_file(tmp_path_factory.mktemp("text_encoders") / "gemma_3_12B_it.safetensors")


def _flags(paths: dict, gemma3) -> list[str]:
    flags = ["--checkpoint", str(paths["checkpoint"]), "--text-encoder", str(paths.get("text_encoder", gemma3)),
             "--vae", str(paths["vae"]), "--audio-vae", str(paths["audio_vae"])]
    return flags + (["--text-projection", str(paths["text_projection"])] if "text_projection" in paths else [])


@pytest.mark.parametrize("version, connectors", [("2.0", False), ("2.3", True), ("2.5", True), ("2.5", False)])
def test_a_gguf_generates_the_frames_and_sound_of_its_dequantised_safetensors_twin(version, connectors, tmp_path,
                                                                                    gemma3, capsys):
    """GGUF (Q8_0 where the rows are whole blocks) + split files vs the same weights dequantised into a safetensors
    model with its metadata (2.0 / 2.3: a bundle; 2.5: a transformer file): the same fp32 values in the same
    operations, so the frames and waveform agree to 1e-5 (in practice bit-equal)."""
    paths = write_gguf_model(tmp_path, version, connectors=connectors)
    output = tmp_path / "gguf.mp4"
    assert main([*RUN, *_flags(paths, gemma3), "--output", str(output),
                 "--tensors", str(tmp_path / "gguf.safetensors")]) == 0, capsys.readouterr().err
    twin = ["--checkpoint", str(paths["twin"]), "--text-encoder", str(paths.get("text_encoder", gemma3))]
    if version == "2.5":
        twin += ["--vae", str(paths["vae"]), "--audio-vae", str(paths["audio_vae"])]
    assert main([*RUN, *twin, "--output", str(tmp_path / "twin.mp4"),
                 "--tensors", str(tmp_path / "twin.safetensors")]) == 0, capsys.readouterr().err
    with av.open(str(output)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.frames, video.width, video.height, audio.channels) == (9, 64, 64, 2)
    got, want = load_file(str(tmp_path / "gguf.safetensors")), load_file(str(tmp_path / "twin.safetensors"))
    assert got["frames"].std() > 0.01 and got["waveform"].abs().max() > 0  # a picture and a sound, not a blank
    for name in ("frames", "waveform"):
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=0)


def test_a_gguf_with_a_lora_generates_what_its_twin_with_the_lora_generates(tmp_path, gemma3, capsys):
    """`--lora` on a GGUF: the LoRA rides beside the blocks, added after dequantisation at each call
    (`quant/low_rank.py`); the safetensors twin fuses it into its weights. The same sums in another order."""
    from support.model_files import write_lora

    paths = write_gguf_model(tmp_path, "2.3", connectors=True)
    lora = ["--lora", f"{write_lora(tmp_path / 'lora.safetensors', seed=3, version='2.3')}:0.8"]
    assert main([*RUN, *_flags(paths, gemma3), *lora, "--output", str(tmp_path / "gguf.mp4"),
                 "--tensors", str(tmp_path / "gguf.safetensors")]) == 0, capsys.readouterr().err
    twin = ["--checkpoint", str(paths["twin"]), "--text-encoder", str(gemma3)]
    assert main([*RUN, *twin, *lora, "--output", str(tmp_path / "twin.mp4"),
                 "--tensors", str(tmp_path / "twin.safetensors")]) == 0, capsys.readouterr().err
    assert main([*RUN, *twin, "--output", str(tmp_path / "base.mp4"),
                 "--tensors", str(tmp_path / "base.safetensors")]) == 0, capsys.readouterr().err
    got, want = load_file(str(tmp_path / "gguf.safetensors")), load_file(str(tmp_path / "twin.safetensors"))
    base = load_file(str(tmp_path / "base.safetensors"))
    assert (got["frames"] - base["frames"]).abs().max() > 1e-3  # the LoRA acts
    for name in ("frames", "waveform"):
        torch.testing.assert_close(got[name], want[name], atol=1e-4, rtol=0)


def test_the_sources_take_the_connectors_from_the_gguf_else_the_text_projection_file(models, tmp_path,
                                                                                    monkeypatch):
    with_connectors, without = models["2.3"], models["2.0"]
    gemma = tmp_path / "gemma.safetensors"
    sources = Sources.split(with_connectors["checkpoint"], gemma, None, None, None,
                            with_connectors["text_projection"])
    assert sources[Component.TEXT_CONNECTORS] == Source(with_connectors["checkpoint"], "")  # bare names in a GGUF
    assert sources[Component.TEXT_PROJECTION] == Source(with_connectors["text_projection"],
                                                        "text_embedding_projection.")
    sources = Sources.split(without["checkpoint"], gemma, None, None, None, without["text_projection"])
    assert sources[Component.TEXT_CONNECTORS] == Source(without["text_projection"], PREFIX)
    sources = Sources.split(without["checkpoint"], gemma, None, None)  # nothing holds them: left out, named
    assert Component.TEXT_CONNECTORS not in sources
    with pytest.raises(CheckpointError, match="no file was given for the text connectors"):
        sources[Component.TEXT_CONNECTORS]
    # a 2.5 safetensors transformer without a text projection file: read as before (no header read)
    monkeypatch.setattr(sources_module, "tensor_names", lambda path: pytest.fail("a header was read"))
    plain = tmp_path / "ltx-2.5.safetensors"
    assert Sources.split(plain, gemma, None, None)[Component.TEXT_CONNECTORS] == Source(plain, PREFIX)


@pytest.mark.parametrize("version, released", [("2.0", RELEASED_2_0), ("2.3", RELEASED_2_3), ("2.5", RELEASED_2_5)])
def test_the_text_config_from_the_released_shapes_is_the_released_one(version, released):
    """The shapes of the released text path (Gemma 3 12B's 3840 × 49 features) give the config its metadata gives:
    2.0's 30 heads of 128 without gates, 2.3's gated 32 heads (video 128, audio 64 wide) and 8 layers, 128 registers."""
    dit = released_transformer_configs()[version]
    config = TextConfig.from_metadata(released, f"{version}.0")
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in TextProjection(config, 3840, 49).state_dict().items()}
    assert text_config_from_shapes(shapes, dit, "x.safetensors") == config
    tiny = TransformerConfig.tiny(version)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in TextProjection(TextConfig.tiny(tiny), 32, 3).state_dict().items()}
    assert text_config_from_shapes(shapes, tiny, "x.safetensors") == TextConfig.tiny(tiny)
    with pytest.raises(ConfigError, match="x.safetensors: no audio connector"):
        text_config_from_shapes({k: v for k, v in shapes.items() if not k.startswith("audio_connector.")}, tiny,
                                "x.safetensors")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf_models")
    paths = {}
    for version, connectors in (("2.3", True), ("2.0", False)):
        (root / version).mkdir()
        paths[version] = write_gguf_model(root / version, version, connectors=connectors)
    return paths


def _refused(flags: list[str], tmp_path, monkeypatch, capsys, *words: str) -> None:
    def no_model_work(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr("ltx2_core.model_files.load_transformer", no_model_work)
    monkeypatch.setattr("ltx2_core.model_files.load_prompt_encoder", no_model_work)
    assert main([*RUN, *flags, "--output", str(tmp_path / "x.mp4")]) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert not list(tmp_path.glob("*.mp4"))


def test_what_a_gguf_generation_lacks_is_refused_naming_the_file_to_give(models, gemma3, tmp_path, monkeypatch,
                                                                          capsys):
    full, bare = _flags(models["2.3"], gemma3), _flags(models["2.0"], gemma3)
    cut = full[:-2]  # without --text-projection: the 2.3 GGUF holds its connectors but not the projection
    _refused(cut, tmp_path, monkeypatch, capsys, "ltx-2.3-tiny-Q8_0.gguf is an LTX-2.3 transformer without its "
             "text projection (text_embedding_projection.*); give --text-projection", "embeddings_connector")
    _refused(bare[:-2], tmp_path, monkeypatch, capsys, "without its text connectors", "and text projection",
             "--text-projection")
    _refused([*bare[:-2], "--text-projection", str(models["2.3"]["text_projection"])], tmp_path, monkeypatch, capsys,
             "holds no text connectors", "--text-projection ltx-2.3-embeddings_connector.safetensors")
    _refused([*bare[:-1], str(models["2.3"]["vae"])], tmp_path, monkeypatch, capsys,  # a file of another kind
             "this is an LTX-2.3 video VAE", "not an LTX-2 text projection")
    two = [*full[:-1], str(models["2.0"]["text_projection"])]  # 2.0's projection with a 2.3 transformer
    _refused(two, tmp_path, monkeypatch, capsys, "different LTX-2 releases", "LTX-2.0 text projection")
    _refused([a for a in full if a not in ("--vae", str(models["2.3"]["vae"]))], tmp_path, monkeypatch, capsys,
             "without the VAEs it needs", "--vae and --audio-vae")
    _refused([*full[:2], *full[4:]], tmp_path, monkeypatch, capsys, "LTX-2.3 transformer file; it needs "
             "--text-encoder gemma_3_12B_it*.safetensors")
    bundle = models["2.3"]["twin"]
    _refused(["--checkpoint", str(bundle), "--text-encoder", str(gemma3), "--text-projection", full[-1]], tmp_path,
             monkeypatch, capsys, "bundles its own text projection", "leave --text-projection out")
    _refused(["--text-projection", full[-1]], tmp_path, monkeypatch, capsys, "--text-projection needs --checkpoint")


def test_the_memory_plan_of_a_gguf_counts_its_connectors(models, gemma3):
    paths = models["2.3"]
    files = ModelFiles(checkpoint=str(paths["checkpoint"]), text_encoder=str(gemma3), vae=str(paths["vae"]),
                       audio_vae=str(paths["audio_vae"]), text_projection=str(paths["text_projection"]))
    files.check("one-stage")
    plan = files.plan("cpu", frames=9, height=64, width=64, passes=1, budget=2**30, dtype=torch.float32)
    assert plan is not None and plan.resident_blocks == TransformerConfig.tiny("2.3").num_layers
    connectors = sum(v.numel() for k, v in load_file(str(paths["twin"])).items()
                     if k.startswith(PREFIX + "video_embeddings_connector."))
    assert plan.side.projection >= 4 * connectors  # the GGUF's connectors in fp32, beside the projection


def test_a_text_projection_file_with_connectors_of_another_size_is_refused_naming_it(models, gemma3, tmp_path):
    from ltx2_core.errors import ShapeMismatchError

    paths = models["2.0"]
    state = load_file(str(paths["text_projection"]))
    key = PREFIX + "video_embeddings_connector.learnable_registers"
    state[key] = torch.zeros(4, state[key].shape[1] + 2)
    bad = tmp_path / "bad-connectors.safetensors"
    save_file(state, str(bad))
    files = ModelFiles(checkpoint=str(paths["checkpoint"]), text_encoder=str(gemma3), vae=str(paths["vae"]),
                       audio_vae=str(paths["audio_vae"]), text_projection=str(bad))
    with pytest.raises((ShapeMismatchError, ValueError)) as caught:
        files.load(dtype=torch.float32)
    assert "bad-connectors.safetensors" in str(caught.value)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_a_video_vae_file_without_config_takes_the_released_section_its_shapes_have(version, models, tmp_path):
    """A header with the released VAE's shapes (no `config` metadata): that release's section, for either half and
    either prefix; a tiny VAE file without metadata fits none and is refused naming the file."""
    from ltx2_core.errors import MissingConfigError
    from ltx2_core.loader.safetensors_file import SafetensorsFile, TensorEntry
    from ltx2_core.loader.vae_weights import load_video_decoder, released_vae_section, video_vae_kind
    from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
    from ltx2_core.model.video_vae.released import RELEASED_VAE_SECTIONS

    section = RELEASED_VAE_SECTIONS[version]
    config = VideoVaeConfig.from_metadata(section)
    for half, model, prefix in (("decoder.", VideoDecoder, "vae."), ("encoder.", VideoEncoder, "")):
        with torch.device("meta"):
            state = model(config).state_dict()
        tensors = {prefix + half + k: TensorEntry("BF16", tuple(v.shape)) for k, v in state.items()
                   if not k.startswith("per_channel_statistics.")}
        file = SafetensorsFile(tmp_path / "vae.safetensors", {}, tensors)
        assert released_vae_section(file) == dict(section)
        assert video_vae_kind(file).decoder == "convolutional"
    other = RELEASED_VAE_SECTIONS["2.3" if version == "2.0" else "2.0"]
    assert released_vae_section(SafetensorsFile(tmp_path / "x", {}, tensors)) != dict(other)
    stripped = tmp_path / "vae-without-config.safetensors"
    save_file(load_file(str(models[version]["vae"])), str(stripped))  # the tiny VAE: no released shapes
    with pytest.raises(MissingConfigError, match="vae-without-config.safetensors: the 'config' metadata has no"):
        load_video_decoder(stripped)


def test_read_gguf_tensors_dequantises_block_types_as_the_gguf_package(tmp_path):
    """The text path's reader of GGUF tensors (the connectors of a real conversion are Q8_0 ... Q4_K where their
    rows are whole blocks): equal to gguf's own dequantisation, into the dtype asked for (bf16 by default)."""
    import gguf
    from support.gguf_files import dequantised, write_gguf

    from ltx2_core.loader.gguf_file import gguf_header, read_gguf_tensors

    state = {"video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q.weight": torch.randn(32, 64),
             "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q.bias": torch.randn(32)}
    path = tmp_path / "connectors.gguf"
    types = write_gguf(path, state, gguf.GGMLQuantizationType.Q8_0)
    assert sorted(t.name for t in types.values()) == ["F32", "Q8_0"]
    header = gguf_header(path)
    assert {k: (e.dtype, e.shape) for k, e in header.tensors.items()} == {k: (types[k].name, tuple(v.shape))
                                                                        for k, v in state.items()}
    names = {f"key{i}": name for i, name in enumerate(state)}
    got = read_gguf_tensors(path, names, dtype=torch.float32)
    want = dequantised(path)
    for key, name in names.items():
        torch.testing.assert_close(got[key], want[name], atol=1e-6, rtol=0)
    assert not torch.equal(want[names["key0"]], state[names["key0"]])  # Q8_0: not the source values
    assert read_gguf_tensors(path, names)["key0"].dtype == torch.bfloat16
