"""Bad input to the sphere forms (issue 13): empty token sets, large inverse temperatures (with the flows' energy
and velocity, which compute the same exponentials).
"""
import math

import pytest
import torch

from energylab import flows as fl
from energylab.forms import sphere as fs
from tests.probes import NO_KEYS, SYM, D, N, unit


@pytest.mark.parametrize("call, name", [
    (lambda: fs.sphere_interaction_energy(NO_KEYS, 1.0), "x"),
    (lambda: fs.sphere_interaction_update(NO_KEYS, 1.0), "x"),
    (lambda: fs.symmetric_attention_update(NO_KEYS, SYM, 1.0), "x"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


@pytest.mark.parametrize("call", [
    lambda x, b: fs.sphere_interaction_energy(x, b),
    lambda x, b: fs.sphere_interaction_update(x, b),
    lambda x, b: fs.symmetric_attention_energy(x, torch.eye(x.shape[-1], dtype=x.dtype), b),
    lambda x, b: fs.symmetric_attention_update(x, torch.eye(x.shape[-1], dtype=x.dtype), b),
    lambda x, b: fl.energy(x.unsqueeze(0), b),
    lambda x, b: fl.energy(x.unsqueeze(0), b, fl.preset_weights("identity", x.shape[-1], dtype=x.dtype)),
    lambda x, b: fl.velocity(x.unsqueeze(0), fl.preset_weights("identity", x.shape[-1], dtype=x.dtype), b,
                             normalized=False),
])
@pytest.mark.parametrize("dtype, ok, too_large", [(torch.float64, 700.0, 1e4), (torch.float32, 80.0, 100.0)])
def test_unnormalised_sphere_forms_overflow_names_beta_with_the_safe_range(call, dtype, ok, too_large):
    x = unit(N, D, dtype=dtype)
    assert torch.isfinite(call(x, ok)).all()  # below log(max float) the exact value is representable
    limit = f"{math.log(torch.finfo(dtype).max):.1f}"
    with pytest.raises(ValueError, match=rf"^beta={too_large:g} is too large for {dtype}.*{limit}"):
        call(x, too_large)


def test_sphere_energy_near_the_overflow_limit_is_correct():
    x, beta = unit(N, D), 700.0
    reference = torch.exp(torch.logsumexp(beta * (x @ x.T).flatten(), 0) - math.log(2 * beta * N * N))
    assert torch.allclose(fs.sphere_interaction_energy(x, beta), reference, rtol=1e-12, atol=0)
