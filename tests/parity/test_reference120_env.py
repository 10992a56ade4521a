"""The second reference environment (tests/support/reference120.py) imports ltx-core 1.2.0, not the 1.0.0 of the
main environment, including its audio VAE and Gemma 4 text encoder, and carries tensors both ways."""

import torch

from support.reference120 import run_reference


def test_reference_120_is_the_one_imported(tmp_path):
    x = torch.randn(3, 4)
    out = run_reference("environment.py", {"x": x}, tmp_path=tmp_path)
    assert out["version"].tolist()[:2] == [1, 2]
    torch.testing.assert_close(out["echo"], x * 2, rtol=1e-6, atol=1e-6)  # one float multiply each side
