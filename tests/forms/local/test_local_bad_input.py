"""Bad input to local self-attention (issue 13): too few tokens for a context."""
import pytest
import torch

from energylab.forms import local as lo
from energylab.models import attractor as at
from tests.probes import D, randn, unit


def test_local_attention_needs_two_tokens():
    x, J = unit(1, D), randn(1, 1, D, D)
    for call in (lambda: lo.local_energies(x, x, J, 1.0), lambda: lo.local_attention_update(x, J, 1.0)):
        with pytest.raises(ValueError, match="^x must hold at least 2 tokens"):
            call()
    with pytest.raises(ValueError, match="^n_tokens must be an int >= 2"):
        at.BareSelfAttention(at.AttractorConfig(n_tokens=1))
    two = unit(2, D)  # N = 2: each token sees exactly the other one, with weight 1
    J2 = randn(2, 2, D, D)
    expected = torch.stack([J2[0, 1] @ two[1], J2[1, 0] @ two[0]])
    assert torch.allclose(lo.local_attention_update(two, J2, 1.0), expected, rtol=1e-14, atol=1e-15)
