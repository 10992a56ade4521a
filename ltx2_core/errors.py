"""Errors raised by ltx2_core. Every message names what is wrong and how to fix it."""


class LTX2Error(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(LTX2Error, ValueError):
    """A model configuration value is missing, malformed or unsupported."""


class UnknownModelVersionError(ConfigError):
    """The checkpoint declares a model version this package does not know."""


class CheckpointError(LTX2Error):
    """A checkpoint file cannot be used."""


class NotSafetensorsError(CheckpointError):
    """The file is not in safetensors format (e.g. a renamed pickle)."""


class CorruptCheckpointError(CheckpointError):
    """The safetensors header or data section is damaged or truncated."""


class MissingConfigError(CheckpointError):
    """The file carries no `config` metadata and no explicit config was given."""


class KeyMismatchError(CheckpointError):
    """Tensors the model needs are missing, or the file has tensors the model does not know."""


class ShapeMismatchError(CheckpointError):
    """A tensor in the file has a different shape than the model expects."""


class NonFiniteError(LTX2Error, FloatingPointError):
    """A stage produced NaN or infinite values (damaged weights, or a float16 run that overflowed)."""


class UnsupportedLayoutError(KeyMismatchError):
    """The file holds the right model under another naming scheme (e.g. diffusers') that is not loaded."""


class UnsupportedQuantizationError(CheckpointError):
    """The checkpoint is quantised in a format this package does not run (it names the formats that load)."""


class SettingError(LTX2Error, ValueError):
    """A bad value of one setting of a generation, model-free and file-free (a `Request` field, a `Windows` field, a
    retake's span). `setting` names it, so a ComfyUI node reports the problem on its input of that name when the
    workflow is queued; the message names the fix."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


class Interrupted(LTX2Error, InterruptedError):
    """A run stopped on request (its `should_stop()` turned true) between two transformer blocks or steps; it
    returned nothing, and the models are ready for the next run."""
