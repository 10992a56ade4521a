"""What the tests of persistent workers share: the request they compare with one process, running it on a
controller, telling a worker process gone, and one set of workers at a time for the tests that only sample on it
(`SharedWorkers`, the `workers` fixture of tests/distributed/conftest.py): each start costs two process launches."""

from __future__ import annotations

from pathlib import Path

from ltx2_core import ModelFiles, Request
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, generate_on_workers

REQUEST = Request("a red car in the rain", width=96, height=64, frames=9, steps=2)
FILES = ModelFiles()


def run_on(controller: Controller, models, request: Request = REQUEST, progress=None, should_stop=None):
    """The request on the workers; here only the prompt encoder, upsampler and decoders (no transformer)."""
    return generate_on_workers(controller, request, models._replace(transformer=None), progress, should_stop)


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def dead(pid: int) -> bool:
    """Gone, or a zombie (dead until its parent reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class SharedWorkers:
    """One controller at a time, kept across tests: asked for other files or another layout, it shuts the one it
    holds down first, and checks that none of its processes remain."""

    def __init__(self) -> None:
        self.key: tuple[ModelFiles, ParallelConfig] | None = None
        self.controller: Controller | None = None

    def __call__(self, layout: ParallelConfig, files: ModelFiles = FILES) -> Controller:
        if self.key != (files, layout):
            self.close()
            self.key, self.controller = (files, layout), Controller(files, layout, threads=1)
        return self.controller

    def close(self) -> None:
        if self.controller is None:
            return
        pids = self.controller.pids
        self.controller.shutdown()
        self.key = self.controller = None
        assert all(gone(pid) for pid in pids), pids  # a shutdown leaves no process behind


def diffusion_decoder_files(folder: Path) -> ModelFiles:
    """An LTX-2.5 transformer and a diffusion video decoder (128 latent channels) written to `folder`, for the
    workers' decode tests."""
    from support.gemma4 import write_transformer25_file
    from support.video_vae25 import TINY_DIFFUSION_VAE, write_diffusion_vae

    return ModelFiles(checkpoint=str(write_transformer25_file(folder / "transformer.safetensors")),
                      vae=str(write_diffusion_vae(folder / "vae.safetensors",
                                                  {**TINY_DIFFUSION_VAE, "latent_channels": 128})))
