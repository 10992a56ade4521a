"""The checks of a generation's model files before anything loads (`ModelFileChecks`, which `ModelFiles` takes its
`check` and `check_model` from): each path exists, each file's header says it is the kind its field names and all are
of one release, the mode's required files are given, the LoRAs fit the transformer, the upsamplers go the right way,
and a transformer file of its own has its text projection and connectors; headers only, never a tensor."""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch

from ltx2_core.errors import CheckpointError, LTX2Error
from ltx2_core.loader import read_header
from ltx2_core.loader.file_kinds import TEMPORAL, FileKind, check_file_kind, check_same_release, file_kind
from ltx2_core.loader.layouts import RELEASED_CHECKPOINTS
from ltx2_core.loader.lora import check_lora_file
from ltx2_core.loader.release_folder import RELEASE_FILES
from ltx2_core.loader.sources import Component, Sources
from ltx2_core.loader.upsampler_weights import check_direction, upsampler_config
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.request_checks import GUIDED_TWO_STAGE

_TEXT_PROJECTION_FILES = ("the file holding them: ComfyUI's ltx-2*-embeddings_connector*.safetensors (LTX-2 / 2.3) or "
                          "the release's official checkpoint (e.g. ltx-2.3-22b-dev.safetensors)")
# what a separate LTX-2 / 2.3 transformer (a GGUF) needs beside it
_FOR_2_0 = {"text_encoder": "gemma_3_12B_it*.safetensors", "vae": "the LTX-2 / 2.3 video VAE (.safetensors)",
            "audio_vae": "the LTX-2 / 2.3 audio VAE and vocoder (.safetensors)"}


class ModelFileChecks:
    """The file checks of `ModelFiles` (its fields: `checkpoint`, `text_encoder`, `vae`, ...; its `split`,
    `resolved` and `transformer_config`), kept apart from the loading."""

    def check(self, mode: str) -> None:
        """ValueError / CheckpointError naming the fix for a missing file, one the mode needs, or a file of the
        wrong kind or release; reads headers only."""
        if self.checkpoint is None:
            given = [name for name in ("text_encoder", "upsampler", "distilled_lora", "vae", "audio_vae",
                                       "text_projection", "temporal_upsampler", "duration_head") if getattr(self, name)]
            if given or self.loras:
                raise ValueError(f"--{(given or ['lora'])[0].replace('_', '-')} needs --checkpoint (the demo model "
                                 "builds its own random components)")
            return
        if os.path.isdir(self.checkpoint):
            self.resolved(mode).check(mode)
            return
        _check_path("--checkpoint", self.checkpoint)  # the model first, then the files that go with it
        if self.split:
            self._check_split(mode)
            return
        _check_kinds([("--checkpoint", self.checkpoint, "checkpoint")])
        if self.text_projection is not None:
            raise ValueError(f"--text-projection is for a GGUF or separate transformer; the checkpoint "
                             f"{os.path.basename(self.checkpoint)} bundles its own text projection and connectors: "
                             "leave --text-projection out")
        if self.text_encoder is None:
            raise ValueError("--checkpoint needs --text-encoder: Gemma 3 12B (ComfyUI's gemma_3_12B_it*.safetensors "
                             "or a Hugging Face folder)")
        if mode != "one-stage" and self.upsampler is None:
            raise ValueError(f"mode {mode} needs --upsampler ltx-2-spatial-upscaler-x2-*.safetensors")
        if mode in (*GUIDED_TWO_STAGE, "two-stage-hq") and self.distilled_lora is None:
            raise ValueError(f"mode {mode} needs --distilled-lora ltx-2-19b-distilled-lora-*.safetensors")
        paths = [("--checkpoint", self.checkpoint), ("--text-encoder", self.text_encoder),
                 ("--upsampler", self.upsampler), ("--distilled-lora", self.distilled_lora),
                 ("--duration-head", self.duration_head)]
        paths += [("--lora", path) for path, _ in self.loras]
        for flag, path in paths:
            if path is not None:
                _check_path(flag, path)
        _check_kinds(self._vae_flags() + self._head_flag())
        check_same_release(_kinds(paths + [(flag, path) for flag, path, _ in self._vae_flags()]))
        self._check_loras()
        self._check_upsamplers()

    def check_model(self, labels: Mapping[str, str] | None = None) -> None:
        """The model's own files only (the checkpoint or transformer, and `vae` / `audio_vae` when given), for a
        loader that takes the text encoder later: each exists and is of its kind, all of one release. `labels`: how
        to name each field in messages (default: its command-line flag)."""
        names = {"checkpoint": "--checkpoint", "vae": "--vae", "audio_vae": "--audio-vae",
                 "text_projection": "--text-projection", "duration_head": "--duration-head", **(labels or {})}
        fields = [("checkpoint", "transformer" if self.split else "checkpoint"), ("vae", "video VAE"),
                  ("audio_vae", "audio VAE"), ("text_projection", "text projection"),
                  ("duration_head", "duration head")]
        given = [(names[field], getattr(self, field), kind) for field, kind in fields if getattr(self, field)]
        for label, path, _ in given:
            _check_path(label, path)
        _check_kinds(given)
        release = check_same_release(_kinds([(label, path) for label, path, _ in given]))
        if self.split:
            self._check_text_path(release or self.transformer_config().version.value, names)

    def _head_flag(self) -> list[tuple[str, str, str]]:
        return [] if self.duration_head is None else [("--duration-head", self.duration_head, "duration head")]

    def _vae_flags(self) -> list[tuple[str, str, str]]:
        return [(flag, path, kind) for flag, path, kind in (("--vae", self.vae, "video VAE"),
                                                            ("--audio-vae", self.audio_vae, "audio VAE"))
                if path is not None]

    def _check_split(self, mode: str) -> None:
        """A transformer file of its own (LTX-2.5's; or a 2.0 / 2.3 transformer-only export): its text encoder and
        VAEs are required, every file of its kind and release."""
        # the release from the file's config (a GGUF's: its shapes); a file without config metadata is named as such
        name, release = os.path.basename(self.checkpoint), self.transformer_config().version.value
        if release in RELEASED_CHECKPOINTS and None in (self.vae, self.audio_vae):
            raise ValueError(f"--checkpoint {name} is an LTX-{release} transformer without the VAEs it needs for "
                             f"decoding; use the full LTX-{release} checkpoint ({RELEASED_CHECKPOINTS[release]}), "
                             "or give --vae and --audio-vae")
        for flag, path, field_name in (("--text-encoder", self.text_encoder, "text_encoder"),
                                       ("--vae", self.vae, "vae"), ("--audio-vae", self.audio_vae, "audio_vae")):
            if path is None:
                raise ValueError(f"--checkpoint {name} is an LTX-{release} transformer file; it needs {flag} "
                                 f"{RELEASE_FILES[field_name] if release == '2.5' else _FOR_2_0[field_name]} (or "
                                 "pass the folder holding the release's files as --checkpoint)")
        if mode != "one-stage" and self.upsampler is None:
            raise ValueError(f"mode {mode} needs --upsampler {RELEASE_FILES['upsampler']}")
        if mode in (*GUIDED_TWO_STAGE, "two-stage-hq") and self.distilled_lora is None:
            raise ValueError(f"mode {mode} needs --distilled-lora {RELEASE_FILES['distilled_lora']}")
        paths = [("--checkpoint", self.checkpoint), ("--text-encoder", self.text_encoder), ("--vae", self.vae),
                 ("--audio-vae", self.audio_vae), ("--upsampler", self.upsampler),
                 ("--distilled-lora", self.distilled_lora), ("--text-projection", self.text_projection),
                 ("--duration-head", self.duration_head)]
        paths += [("--lora", path) for path, _ in self.loras]
        for flag, path in paths:
            if path is not None:
                _check_path(flag, path)
        kinds = {"--checkpoint": "transformer", "--text-encoder": "text encoder", "--vae": "video VAE",
                 "--audio-vae": "audio VAE", "--upsampler": "latent upsampler", "--distilled-lora": "LoRA",
                 "--lora": "LoRA", "--text-projection": "text projection", "--duration-head": "duration head"}
        _check_kinds([(flag, path, kinds[flag]) for flag, path in paths
                      if path is not None and os.path.isfile(path)])
        release = check_same_release(_kinds(paths)) or release
        self._check_loras()
        self._check_upsamplers()
        if release == "2.5" and os.path.isfile(self.text_encoder):
            found = file_kind(self.text_encoder)
            if found.version != release:
                raise CheckpointError(
                    f"--text-encoder {self.text_encoder}: this is {found.describe()}, but the LTX-{release} "
                    f"transformer {name} needs its Gemma 4 text encoder {RELEASE_FILES['text_encoder']}")
        self._check_text_path(release, {"checkpoint": "--checkpoint", "text_projection": "--text-projection"})

    def _check_upsamplers(self) -> None:
        """ConfigError naming the fix when --upsampler is a temporal upsampler or --temporal-upsampler a spatial
        one (or no upsampler at all); headers only."""
        for flag, path, temporal in (("--upsampler", self.upsampler, False),
                                     ("--temporal-upsampler", self.temporal_upsampler, True)):
            if path is None:
                continue
            _check_path(flag, path)
            _check_kinds([(flag, path, "latent upsampler")])
            if temporal or file_kind(path).detail == TEMPORAL:  # a spatial file's config is read when it loads
                check_direction(upsampler_config(read_header(path, "latent upsampler")), temporal, f"{flag} {path}")

    def _check_loras(self) -> None:
        """LoraError naming the file when --lora or --distilled-lora does not fit the transformer: every target and
        shape from the LoRA's header against the model built on meta from the checkpoint's config."""
        loras = [path for path, _ in self.loras] + ([self.distilled_lora] if self.distilled_lora else [])
        if not loras:
            return
        with torch.device("meta"):
            model = LTX2Transformer(self.transformer_config())
        for path in loras:
            check_lora_file(path, model)

    def _check_text_path(self, release: str, names: Mapping[str, str]) -> None:
        """A transformer file of its own: ValueError naming the file to give (`names`: how each field is named)
        when neither it nor `text_projection` holds the text connectors, or, before LTX-2.5 (whose text encoder
        file holds it), the text projection; headers only."""
        sources = Sources.split(self.checkpoint, None, None, None, None, self.text_projection)
        name, flag = os.path.basename(self.checkpoint), names["text_projection"]
        what = [part for part, component in (("text connectors (video/audio_embeddings_connector.*)",
                                              Component.TEXT_CONNECTORS),
                                             ("text projection (text_embedding_projection.*)",
                                              Component.TEXT_PROJECTION))
                if component not in sources and (component is Component.TEXT_CONNECTORS or release != "2.5")]
        if not what:
            return
        if self.text_projection is not None:
            raise ValueError(f"{flag} {os.path.basename(self.text_projection)} holds no {' and no '.join(what)} for "
                             f"the LTX-{release} transformer {name}; give {_TEXT_PROJECTION_FILES}")
        raise ValueError(f"{names['checkpoint']} {name} is an LTX-{release} transformer without its "
                         f"{' and '.join(what)}; give {flag} {_TEXT_PROJECTION_FILES}")


def _kinds(paths: list[tuple[str, str | None]]) -> dict[str, FileKind]:
    """Flag -> what each given file is (headers only), for the same-release check; a folder, or a file that is not
    safetensors, is left to its loader's own check and message."""
    kinds = {}
    for flag, path in paths:
        if path is not None and os.path.isfile(path):
            try:
                kinds[f"{flag} {os.path.basename(path)}"] = file_kind(path)
            except LTX2Error:
                continue
    return kinds


def kind_of(path: str) -> str | None:
    try:
        return file_kind(path).kind
    except LTX2Error:
        return None


def _check_kinds(files: list[tuple[str, str, str]]) -> None:
    """CheckpointError for a file (flag, path, kind) whose header says it is another LTX-2 kind, naming what it is
    and where it belongs; a file of no LTX-2 kind, or no safetensors file, is left to its loader's own message."""
    for flag, path, kind in files:
        if os.path.isfile(path) and kind_of(path) not in (None, "unknown"):
            check_file_kind(path, kind, flag)


def _check_path(flag: str, path: str) -> None:
    """A model file that exists; a directory only for the text encoder, and then a Hugging Face model folder."""
    if not os.path.exists(path):
        raise ValueError(f"{flag} {path}: no such file; check the path (models usually live in "
                         "ComfyUI/models/checkpoints, text_encoders, latent_upscale_models and loras)")
    if not os.path.isdir(path):
        return
    if flag != "--text-encoder":
        raise ValueError(f"{flag} {path} is a directory, not a .safetensors file; pass the file inside it")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{flag} {path} is a directory without config.json, so not a Hugging Face Gemma 3 folder; "
                         "pass ComfyUI's single file gemma_3_12B_it*.safetensors or the google/gemma-3-12b-it folder")
