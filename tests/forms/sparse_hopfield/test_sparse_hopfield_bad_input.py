"""Bad input to the sparse Hopfield maps and energies: alpha <= 1, unknown kinds, empty scores or patterns."""
import pytest
import torch

from energylab.forms import sparse_hopfield as sh


def test_bad_input():
    theta = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="alpha"):
        sh.entmax_bisect(theta, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        sh.normmax(theta, 0.5)
    with pytest.raises(ValueError, match="kind"):
        sh.regulariser("hardmax")
    with pytest.raises(ValueError, match="theta"):
        sh.sparsemax(torch.zeros(3, 0))
    with pytest.raises(ValueError, match="X"):
        sh.fy_hopfield_update(torch.zeros(2, 4), torch.zeros(0, 4), 1.0)
    with pytest.raises(TypeError, match="theta"):
        sh.entmax15(torch.zeros(3, dtype=torch.long))
