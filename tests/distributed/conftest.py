"""Fixtures of the distributed tests: one set of persistent workers at a time across the session (`workers`), and
the request every layout must sample as one process does (`local`)."""

from __future__ import annotations

import pytest

from ltx2_core import generate
from ltx2_core.demo import demo_models
from support.workers import REQUEST, SharedWorkers


@pytest.fixture(scope="session")
def workers():
    shared = SharedWorkers()
    yield shared
    shared.close()


@pytest.fixture(scope="session")
def local():
    """The demo models and `REQUEST` generated in one process."""
    models = demo_models("2.0")
    return models, generate(REQUEST, models)
