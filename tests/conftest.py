"""Test-wide settings: deterministic, single-threaded-friendly CPU runs without autograd."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _no_grad_and_seed():
    torch.manual_seed(0)
    with torch.no_grad():
        yield
