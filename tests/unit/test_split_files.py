"""LTX-2.5's component files: `Sources.split` maps each component to its file and prefix, every loader reads its
config from its own file, `ModelFiles` takes a 2.5 transformer file with --text-encoder / --vae / --audio-vae or a
folder holding the release's files (found by their headers), plans memory from the separate files, and the command
line refuses each bad combination with its own message before any model work. The files are tiny, written in the
released layouts by the writers in tests/support; the text encoder is a header-only stand-in (the Gemma 4 file)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

import ltx2_core.model_files as model_files
from ltx2_core import TransformerConfig
from ltx2_core.__main__ import main
from ltx2_core.demo import DEMO_VAES, demo_transformer
from ltx2_core.errors import CheckpointError
from ltx2_core.loader import (load_audio_decoder, load_transformer, load_upsampler, load_video_decoder,
                              load_video_encoder, load_vocoder, read_header)
from ltx2_core.loader.safetensors_file import DTYPE_BYTES
from ltx2_core.loader.sources import Component, Source, Sources
from ltx2_core.memory.plan import TILE_BYTES_512, decoder_bytes
from ltx2_core.memory.sizes import checkpoint_side_bytes, diffusion_decode_bytes, projection_part_bytes
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model_files import ModelFiles
from support.audio25 import write_audio_vae25
from support.configs import GEMMA_SOURCE_2_5
from support.model_files import write_lora, write_upsampler
from support.transformer25 import write_transformer25
from support.video_vae25 import TINY_DIFFUSION_VAE, write_conv_vae25, write_diffusion_vae

TRANSFORMER = "ltx-2.5-22b-dev-transformer-bf16.safetensors"
DISTILLED = "ltx-2.5-22b-distilled-transformer-bf16.safetensors"
TEXT = "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"
VAE, CONV = "ltx-2.5-video-vae-bf16.safetensors", "ltx-2.5-video-vae-conv-bf16.safetensors"
AUDIO = "ltx-2.5-audio-vae-bf16.safetensors"
UPSAMPLER = "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"
LORA = "ltx-2.5-22b-distilled-lora-450-bf16.safetensors"


def write_text_encoder_stand_in(path, gemma_version: str = GEMMA_SOURCE_2_5["gemma_version"]):
    """The header of a Gemma 4 text encoder file (gemma_config, tokenizer_json, a layer, the projection): enough
    for every header check; no Gemma 4 is built from it."""
    tensors = {"model.layers.0.post_feedforward_layernorm.weight": torch.ones(4),
               "tokenizer_json": torch.zeros(8, dtype=torch.uint8),
               "text_embedding_projection.video_aggregate_embed.weight": torch.zeros(16, 40),
               "text_embedding_projection.video_aggregate_embed.bias": torch.zeros(16),
               "text_embedding_projection.audio_aggregate_embed.weight": torch.zeros(8, 40),
               "text_embedding_projection.audio_aggregate_embed.bias": torch.zeros(8)}
    config = {"model_type": "gemma4_unified", "gemma_version": gemma_version}
    save_file(tensors, str(path), metadata={"gemma_config": json.dumps(config), "format": "pt"})
    return path


@pytest.fixture(scope="module")
def comfyui(tmp_path_factory):
    """ComfyUI's models folder holding LTX-2.5's seven files (both video VAEs); the VAEs fit the tiny transformer's
    128 latent channels."""
    root = tmp_path_factory.mktemp("models")
    for folder in ("diffusion_models", "text_encoders", "vae", "latent_upscale_models", "loras"):
        (root / folder).mkdir()
    config = TransformerConfig.tiny("2.5")
    write_transformer25(root / "diffusion_models" / TRANSFORMER, demo_transformer(config).state_dict(), config)
    write_text_encoder_stand_in(root / "text_encoders" / TEXT)
    write_diffusion_vae(root / "vae" / VAE, {**TINY_DIFFUSION_VAE, "latent_channels": 128})
    write_conv_vae25(root / "vae" / CONV, DEMO_VAES["2.5"])
    write_audio_vae25(root / "vae" / AUDIO)
    write_upsampler(root / "latent_upscale_models" / UPSAMPLER, "2.5")
    write_lora(root / "loras" / LORA, 1, "2.5")
    return root


def _files(root, vae=VAE, **changes) -> ModelFiles:
    paths = dict(checkpoint=str(root / "diffusion_models" / TRANSFORMER),
                 text_encoder=str(root / "text_encoders" / TEXT), vae=str(root / "vae" / vae),
                 audio_vae=str(root / "vae" / AUDIO))
    return ModelFiles(**(paths | changes))


def test_split_sources_map_every_component_to_its_file_and_prefix(comfyui, tmp_path):
    sources = _files(comfyui, upsampler=str(comfyui / "latent_upscale_models" / UPSAMPLER)).sources()
    transformer, text, vae, audio = (comfyui / "diffusion_models" / TRANSFORMER, comfyui / "text_encoders" / TEXT,
                                     comfyui / "vae" / VAE, comfyui / "vae" / AUDIO)
    assert sources.parts == {
        Component.TRANSFORMER: Source(transformer, "model.diffusion_model."),
        Component.TEXT_CONNECTORS: Source(transformer, "model.diffusion_model."),
        Component.TEXT_PROJECTION: Source(text, "text_embedding_projection."),
        Component.VIDEO_DECODER: Source(vae, ""), Component.VIDEO_ENCODER: Source(vae, ""),
        Component.AUDIO_DECODER: Source(audio, "audio_vae."), Component.AUDIO_ENCODER: Source(audio, "audio_vae."),
        Component.VOCODER: Source(audio, "vocoder."), Component.UPSAMPLER: Source(comfyui / "latent_upscale_models" / UPSAMPLER, "")}
    nested = write_conv_vae25(tmp_path / "nested.safetensors", prefix="vae.")
    assert Sources.split(transformer, text, nested, audio)[Component.VIDEO_ENCODER] == Source(nested, "vae.")


def test_every_loader_reads_its_config_from_its_own_file(comfyui):
    conv = _files(comfyui, vae=CONV).sources()
    config = TransformerConfig.tiny("2.5")
    transformer = load_transformer(conv[Component.TRANSFORMER])
    assert transformer.config.version == config.version and transformer.config.ff_bias is False
    want = demo_transformer(config).state_dict()
    for name, value in transformer.state_dict().items():
        torch.testing.assert_close(value, want[name], rtol=0, atol=0)  # a pure copy of the written tensors
    assert load_video_decoder(conv[Component.VIDEO_DECODER]).config.latent_channels == 128
    assert load_video_encoder(conv[Component.VIDEO_ENCODER]) is not None
    assert isinstance(load_video_decoder(_files(comfyui).sources()[Component.VIDEO_DECODER]), DiffusionVideoDecoder)
    assert load_audio_decoder(conv[Component.AUDIO_DECODER]) is not None
    assert load_vocoder(conv[Component.VOCODER]).sample_rate == 48000
    assert load_upsampler(comfyui / "latent_upscale_models" / UPSAMPLER).config.in_channels == 128


def test_the_checkpoint_loaders_take_the_split_files(comfyui):
    files = _files(comfyui)
    assert files.split and files.transformer_config().version.value == "2.5"
    models = files.load_checkpoint()
    assert isinstance(models.decoders.video, DiffusionVideoDecoder)
    assert models.video_encoder is not None  # the diffusion decoder's file carries the convolutional encoder too
    conv = _files(comfyui, vae=CONV).load_checkpoint(transformer=False)
    assert conv.transformer is None and conv.video_encoder is not None


def test_memory_sizes_come_from_the_separate_files(comfyui):
    sources = _files(comfyui).sources()
    headers = {name: read_header(path).tensors for name, path in
               (("te", comfyui / "text_encoders" / TEXT), ("dit", comfyui / "diffusion_models" / TRANSFORMER),
                ("vae", comfyui / "vae" / VAE), ("audio", comfyui / "vae" / AUDIO))}

    def nbytes(file, *prefixes):
        return sum(_count(e.shape) * DTYPE_BYTES[e.dtype] for name, e in headers[file].items()
                   if name.startswith(prefixes))

    projection = nbytes("te", "text_embedding_projection.") + nbytes(
        "dit", "model.diffusion_model.video_embeddings_connector.", "model.diffusion_model.audio_embeddings_connector.")
    assert checkpoint_side_bytes(sources, None)[0] == projection > nbytes("te", "text_embedding_projection.")
    assert 0 < projection_part_bytes(sources, None) < projection
    assert decoder_bytes(sources) == nbytes("vae", "decoder.", "per_channel_statistics.") + nbytes(
        "audio", "audio_vae.", "vocoder.")
    node = _files(comfyui, text_encoder=None)  # a loader node plans before the text encoder is chosen
    plan = node.plan("cpu", frames=9, height=64, width=64, passes=4, budget=10**9)
    assert plan.decoders == decoder_bytes(sources) and plan.weights.blocks == 3
    assert plan.decode_base == diffusion_decode_bytes(9, 64, 64)[0]  # the diffusion decoder's video-sized tensors
    conv = _files(comfyui, vae=CONV, text_encoder=None).plan("cpu", frames=9, height=64, width=64, passes=4,
                                                             budget=10**9)
    assert conv.decode_base == 0 and conv.tile_bytes_512 == TILE_BYTES_512
    assert checkpoint_side_bytes(node.sources(), None)[0] == projection - nbytes("te", "text_embedding_projection.")


def _count(shape) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def test_a_folder_is_resolved_by_headers_and_an_open_choice_is_refused(comfyui, tmp_path):
    with pytest.raises(CheckpointError, match=r"holds 2 files for the video VAE .*pick one with --vae PATH"):
        ModelFiles(str(comfyui)).resolved()
    files = ModelFiles(str(comfyui), vae=str(comfyui / "vae" / CONV)).resolved("two-stage")
    assert (files.checkpoint, files.text_encoder, files.audio_vae, files.upsampler, files.distilled_lora) == (
        str(comfyui / "diffusion_models" / TRANSFORMER), str(comfyui / "text_encoders" / TEXT),
        str(comfyui / "vae" / AUDIO), str(comfyui / "latent_upscale_models" / UPSAMPLER),
        str(comfyui / "loras" / LORA))
    comfyui_root = tmp_path / "ComfyUI"
    comfyui_root.mkdir()
    (comfyui_root / "models").symlink_to(comfyui)
    assert ModelFiles(str(comfyui_root), vae=str(comfyui / "vae" / CONV)).resolved().audio_vae.endswith(AUDIO)
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in (TRANSFORMER, TEXT, VAE, AUDIO):
        folder = "diffusion_models" if name == TRANSFORMER else "text_encoders" if name == TEXT else "vae"
        shutil.copy(comfyui / folder / name, flat / name)
    shutil.copy(flat / TRANSFORMER, flat / DISTILLED)
    shutil.copy(comfyui / "latent_upscale_models" / UPSAMPLER, flat / UPSAMPLER)
    assert ModelFiles(str(flat)).resolved("distilled").checkpoint.endswith(DISTILLED)
    assert ModelFiles(str(flat)).resolved("one-stage").vae.endswith(VAE)
    (flat / AUDIO).unlink()
    with pytest.raises(CheckpointError, match=f"no LTX-2.5 audio VAE file in {flat}; put {AUDIO} there"):
        ModelFiles(str(flat)).resolved()


@pytest.mark.parametrize("vae, flags", [(CONV, ["--mode", "distilled"]), (VAE, ["--steps", "2"])],
                         ids=["distilled, conv decoder", "one-stage, diffusion decoder"])
def test_a_split_run_from_the_command_line_writes_an_mp4(vae, flags, comfyui, tmp_path, monkeypatch, capsys):
    """Every component from the 2.5 files in ComfyUI's folder (the text encoder stands in: the demo's, which the
    Gemma 4 branch reads from the real file)."""
    from ltx2_core.demo import demo_prompt_encoder

    monkeypatch.setattr(model_files, "load_prompt_encoder",
                        lambda *args, **kwargs: demo_prompt_encoder(TransformerConfig.tiny("2.5")))
    output = tmp_path / "split.mp4"
    assert main(["generate", "--checkpoint", str(comfyui), "--vae", str(comfyui / "vae" / vae), *flags,
                 "--width", "64", "--height", "64", "--frames", "9", "--output", str(output), "--no-progress"]) == 0, \
        capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"with {vae} and {AUDIO}" in out and f"wrote {output}" in out and "48000 Hz" in out


def test_a_bundle_takes_its_vaes_from_the_files_given_beside_it(tiny_checkpoints, gemma_files, tmp_path):
    """--vae / --audio-vae with an LTX-2 / 2.3 checkpoint replace its bundled VAEs (e.g. a VAE saved out of it), each
    read with the prefix its tensors carry; the rest stays the bundle's."""
    from safetensors import safe_open

    bundle = tiny_checkpoints["2.3"]
    with safe_open(str(bundle), "pt") as f:
        config = json.loads(f.metadata()["config"])
        tensors = {name: f.get_tensor(name) for name in f.keys()}

    def sections(*names):
        return {"config": json.dumps({name: config[name] for name in names})}

    vae, audio = tmp_path / "video_vae.safetensors", tmp_path / "audio_vae.safetensors"
    save_file({k[len("vae."):]: v for k, v in tensors.items() if k.startswith("vae.")}, str(vae),
              metadata=sections("vae"))
    save_file({k: v for k, v in tensors.items() if k.startswith(("audio_vae.", "vocoder."))}, str(audio),
              metadata=sections("audio_vae", "vocoder"))
    files = ModelFiles(str(bundle), str(gemma_files[0]), vae=str(vae), audio_vae=str(audio))
    files.check("one-stage")
    sources = files.sources()
    assert sources[Component.VIDEO_DECODER] == sources[Component.VIDEO_ENCODER] == Source(vae, "")
    assert (sources[Component.AUDIO_DECODER], sources[Component.VOCODER]) == (Source(audio, "audio_vae."),
                                                                              Source(audio, "vocoder."))
    assert sources[Component.TRANSFORMER] == Source(bundle, "model.diffusion_model.")
    models = files.load_checkpoint(transformer=False)
    want = load_video_decoder(bundle).state_dict()
    for name, value in models.decoders.video.state_dict().items():
        torch.testing.assert_close(value, want[name], rtol=0, atol=0)  # the same stored tensors, another file
    assert files.label.endswith("with video_vae.safetensors and audio_vae.safetensors")


BAD = [
    (["--checkpoint", "{t}"], f"needs --text-encoder {TEXT}"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}"], "needs --vae ltx-2.5-video-vae-bf16.safetensors"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{vae}"], f"needs --audio-vae {AUDIO}"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{audio}", "--audio-vae", "{audio}"],
     "this is an LTX-2.5 audio VAE, not an LTX-2 video VAE; it belongs in the vae folder. Pick an LTX-2 video VAE "
     "here (--vae)"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{vae}", "--audio-vae", "{conv}"],
     "this is an LTX-2.5 video VAE (convolutional decoder), not an LTX-2 audio VAE"),
    (["--checkpoint", "{t}", "--text-encoder", "{t}", "--vae", "{vae}", "--audio-vae", "{audio}"],
     "this is an LTX-2.5 transformer, not an LTX-2 text encoder; it belongs in the diffusion_models folder"),
    (["--checkpoint", "{t}", "--text-encoder", "{gemma3}", "--vae", "{vae}", "--audio-vae", "{audio}"],
     "this is an LTX-2 text encoder (Gemma 3), but the LTX-2.5 transformer"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{vae}", "--audio-vae", "{audio}", "--mode",
      "distilled"], f"mode distilled needs --upsampler {UPSAMPLER}"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{vae}", "--audio-vae", "{audio}", "--mode",
      "distilled", "--upsampler", "{audio}"],
     "this is an LTX-2.5 audio VAE, not an LTX-2 latent upsampler; it belongs in the vae folder. Pick an LTX-2 latent "
     "upsampler here (--upsampler), from the latent_upscale_models folder"),
    (["--checkpoint", "{t}", "--text-encoder", "{te}", "--vae", "{vae}", "--audio-vae", "{audio}", "--mode",
      "two-stage", "--upsampler", "{up}", "--distilled-lora", "{t}"],
     "this is an LTX-2.5 transformer, not an LTX-2 LoRA; it belongs in the diffusion_models folder"),
    (["--checkpoint", "{vae}", "--text-encoder", "{te}"],
     "this is an LTX-2.5 video VAE (diffusion decoder), not an LTX-2 checkpoint; it belongs in the vae folder"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{gemma3}", "--vae", "{conv}"], "different LTX-2 releases"),
    (["--checkpoint", "{root}"], "holds 2 files for the video VAE"),
    (["--checkpoint", "{tmp}"], "is a directory without an LTX-2.5 transformer file"),
    (["--vae", "{vae}"], "--vae needs --checkpoint"),
]


@pytest.mark.parametrize("flags, message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_combinations_exit_2_before_any_model_work(flags, message, comfyui, tiny_checkpoints, gemma_files,
                                                       tmp_path, monkeypatch, capsys):
    from PIL import Image

    def no_model_work(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr("ltx2_core.demo.demo_models", no_model_work)
    monkeypatch.setattr(model_files, "load_transformer", no_model_work)
    Image.new("RGB", (40, 30)).save(tmp_path / "cat.png")
    names = dict(t=comfyui / "diffusion_models" / TRANSFORMER, te=comfyui / "text_encoders" / TEXT,
                 vae=comfyui / "vae" / VAE, conv=comfyui / "vae" / CONV, audio=comfyui / "vae" / AUDIO,
                 gemma3=gemma_files[0], ckpt=tiny_checkpoints["2.3"], root=comfyui, tmp=tmp_path,
                 up=comfyui / "latent_upscale_models" / UPSAMPLER)
    flags = [flag.format(**names) for flag in flags]
    assert main(["generate", "--output", str(tmp_path / "x.mp4"), *flags]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "model:" not in captured.out


def test_a_2_3_transformer_only_export_is_named_as_such(tmp_path, gemma_files, capsys):
    from support.transformer25 import transformer25_metadata

    config = TransformerConfig.tiny("2.3")
    path = write_transformer25(tmp_path / "ltx-2.3-transformer-only.safetensors", demo_transformer(config).state_dict(),
                               config, metadata=transformer25_metadata(config, "2.3.0"))
    assert main(["generate", "--checkpoint", str(path), "--text-encoder", str(gemma_files[0]),
                 "--output", str(tmp_path / "x.mp4")]) == 2
    assert "is an LTX-2.3 transformer without the VAEs it needs for decoding; use the full LTX-2.3 checkpoint" in \
        capsys.readouterr().err


def test_a_split_run_with_the_gemma4_text_encoder_file(comfyui, tmp_path, capsys):
    """Every component from the 2.5 files, the text encoder too (its writer comes with the Gemma 4 branch of issue
    23; skipped where it is absent): one-stage with the diffusion decoder under a memory plan (the text projection
    and Gemma's layers counted from the text encoder file)."""
    gemma4 = pytest.importorskip("support.gemma4")
    root = tmp_path / "models"
    shutil.copytree(comfyui, root)
    (root / "text_encoders" / TEXT).unlink()
    gemma4.write_gemma4_file(root / "text_encoders" / TEXT)
    files = ModelFiles(str(root), vae=str(root / "vae" / VAE)).resolved()
    plan = files.plan("cpu", frames=9, height=64, width=64, passes=4, budget=10**9)
    assert plan.side.projection > 0 and plan.side.gemma_layers > 0 and plan.decode_base > 0
    output = tmp_path / "gemma4.mp4"
    assert main(["generate", "--checkpoint", str(root), "--vae", str(root / "vae" / VAE), "--steps", "2",
                 "--memory-budget", "5", "--width", "64", "--height", "64", "--frames", "9", "--output", str(output),
                 "--no-progress"]) == 0, capsys.readouterr().err
    assert f"wrote {output}" in capsys.readouterr().out


def test_a_loader_node_s_header_checks_know_the_2_5_component_files(comfyui):
    """`identify.check_kind` (the nodes' queue-time check) takes each 2.5 component file for its kind, refuses it
    for another, and names a 2.5 transformer picked as a checkpoint."""
    from ltx2_core.loader.identify import check_kind

    files = {"transformer": comfyui / "diffusion_models" / TRANSFORMER, "video VAE": comfyui / "vae" / VAE,
             "audio VAE": comfyui / "vae" / AUDIO}
    for kind, path in files.items():
        check_kind(path, kind)
        for other in set(files) - {kind}:
            with pytest.raises(CheckpointError, match=f"not an LTX-2 {other}"):
                check_kind(path, other)
    check_kind(comfyui / "vae" / CONV, "video VAE")
    with pytest.raises(CheckpointError, match="an LTX-2.5 transformer file, whose VAEs and vocoder are files"):
        check_kind(files["transformer"], "checkpoint")
