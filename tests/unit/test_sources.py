"""The seams for models shipped otherwise than today: components from separate files (`loader.sources`) and the
language model behind the prompt encoder (`model.text.backbone`)."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from ltx2_core.loader import (load_audio_decoder, load_audio_encoder, load_transformer, load_video_decoder,
                              load_video_encoder, load_vocoder)
from ltx2_core.loader.gemma_files import find_gemma
from ltx2_core.loader.sources import BUNDLE, Component, Source, Sources
from ltx2_core.loader.text_weights import load_prompt_encoder, load_text_projection
from ltx2_core.model.text import backbone as registry
from ltx2_core.model.text.gemma3 import GEMMA3
from support.configs import TINY_GEMMA

VERSION = "2.3"


def _split(bundle, folder, parts):
    """Writes each (name, bundle prefix, prefix in the new file) part of `bundle` to `folder/name.safetensors` with
    the bundle's metadata, as a release shipping separate files would."""
    with safe_open(str(bundle), "pt") as f:
        metadata, names = f.metadata(), list(f.keys())
        tensors = {name: f.get_tensor(name) for name in names}
    paths = {}
    for name, old, new in parts:
        part = {new + key[len(old):]: value for key, value in tensors.items() if key.startswith(old)}
        paths[name] = folder / f"{name}.safetensors"
        save_file(part, str(paths[name]), metadata=metadata)
    return paths


@pytest.fixture(scope="module")
def separate(tiny_checkpoints, tmp_path_factory):
    """The tiny bundle as separate files: VAE, audio VAE, vocoder and the text projection without a prefix; the DiT
    (with its connectors, as they sit in the bundle) under its own `net.`."""
    files = _split(tiny_checkpoints[VERSION], tmp_path_factory.mktemp("separate"), [
        ("vae", "vae.", ""), ("audio_vae", "audio_vae.", ""), ("vocoder", "vocoder.", ""),
        ("text_projection", "text_embedding_projection.", ""), ("transformer", "model.diffusion_model.", "net."),
    ])
    transformer = Source(files["transformer"], "net.")
    return Sources.separate({
        Component.TRANSFORMER: transformer, Component.TEXT_CONNECTORS: transformer,
        Component.TEXT_PROJECTION: files["text_projection"], Component.VIDEO_DECODER: files["vae"],
        Component.VIDEO_ENCODER: files["vae"], Component.AUDIO_DECODER: files["audio_vae"],
        Component.AUDIO_ENCODER: files["audio_vae"], Component.VOCODER: files["vocoder"],
    })


def _assert_same(got: nn.Module, want: nn.Module) -> None:
    got, want = got.state_dict(), want.state_dict()
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=0)  # the same stored tensors


def test_a_bundle_gives_every_component_its_prefix(tiny_checkpoints):
    sources = Sources.bundled(tiny_checkpoints[VERSION])
    assert sources[Component.VIDEO_DECODER] == Source(tiny_checkpoints[VERSION], "vae.")
    assert sources[Component.TRANSFORMER].prefix == BUNDLE[Component.TRANSFORMER] == "model.diffusion_model."
    assert Component.UPSAMPLER not in sources
    with_upsampler = sources.with_files({Component.UPSAMPLER: "up.safetensors"})
    assert with_upsampler[Component.UPSAMPLER] == Source(Path("up.safetensors"), "")


@pytest.mark.parametrize("load", [load_video_decoder, load_video_encoder, load_audio_decoder, load_audio_encoder,
                                  load_vocoder], ids=lambda f: f.__name__)
def test_a_component_from_its_own_file_equals_the_bundled_one(load, separate, tiny_checkpoints):
    component = {load_video_decoder: Component.VIDEO_DECODER, load_video_encoder: Component.VIDEO_ENCODER,
                 load_audio_decoder: Component.AUDIO_DECODER, load_audio_encoder: Component.AUDIO_ENCODER,
                 load_vocoder: Component.VOCODER}[load]
    _assert_same(load(separate[component]), load(tiny_checkpoints[VERSION]))


def test_the_transformer_and_the_text_path_from_separate_files(separate, tiny_checkpoints, gemma_files):
    bundle = tiny_checkpoints[VERSION]
    _assert_same(load_transformer(separate[Component.TRANSFORMER]), load_transformer(bundle))
    gemma = find_gemma(gemma_files[0])
    _assert_same(load_text_projection(separate, gemma), load_text_projection(bundle, gemma))


def test_a_missing_component_is_named(separate):
    with pytest.raises(Exception, match="no file was given for the latent upsampler"):
        separate[Component.UPSAMPLER]


def test_the_registry_picks_gemma3_for_both_layouts(gemma_files):
    assert registry.backbone_for("gemma3") is GEMMA3 and registry.backbone_for("gemma3_text") is GEMMA3
    assert registry.backbone_for("llama") is None
    assert [find_gemma(path).backbone for path in gemma_files] == [GEMMA3, GEMMA3]


class _ToyLM(nn.Module):
    """A language model of another family: embeddings and linear layers, with an HF-like `config.model_type`."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.config = type("Config", (), {"model_type": "toy_lm", "hidden_size": hidden})()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))


class _ToyBackbone:
    name = "Toy"
    model_types = ("toy_lm",)

    def __init__(self) -> None:
        self.calls = 0

    def text_values(self, raw, where):
        return dict(raw)

    def recognizes(self, keys):
        return "layers.0.weight" in keys

    def values_from_shapes(self, shapes, where):
        raise AssertionError("the toy is only read from a folder")

    def build(self, values):
        with torch.device("meta"):
            model = _ToyLM(values["vocab_size"], values["hidden_size"], values["num_hidden_layers"])
        return model.eval().requires_grad_(False)

    def materialize_buffers(self, model, device):
        pass

    def hidden_states(self, model, input_ids, attention_mask):
        self.calls += 1
        states = [model.embed_tokens(input_ids)]
        for layer in model.layers:
            states.append(torch.tanh(layer(states[-1])))
        return tuple(states)


def _toy_folder(folder, gemma_folder):
    """A Hugging Face folder of the toy family with the tiny Gemma's tokenizer (same sizes: the projection fits)."""
    folder.mkdir()
    sizes = {k: TINY_GEMMA[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers")}
    (folder / "config.json").write_text(json.dumps({"model_type": "toy_lm", **sizes}))
    model = _ToyLM(sizes["vocab_size"], sizes["hidden_size"], sizes["num_hidden_layers"])
    save_file({"model." + k: v for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    for path in gemma_folder.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(path, folder / path.name)
    return folder


def test_a_toy_backbone_plugs_in_through_the_registry_only(tmp_path, gemma_files, tiny_checkpoints, monkeypatch):
    toy = _ToyBackbone()
    monkeypatch.setattr(registry, "_REGISTERED", list(registry.registered()))
    registry.register(toy)
    folder = _toy_folder(tmp_path / "toy", gemma_files[1])
    assert find_gemma(folder).backbone is toy
    encoder = load_prompt_encoder(folder, tiny_checkpoints[VERSION], max_length=32)
    assert encoder.backbone is toy and isinstance(encoder.gemma, _ToyLM)
    embeddings, _ = encoder.encode("a red car in the rain")
    assert toy.calls == 1 and torch.isfinite(embeddings.video).all()
