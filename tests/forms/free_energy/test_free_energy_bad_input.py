"""Bad input to the free-energy forms of paper 000 (issues 13 and 35): empty token sets, fully masked rows, a dtype
that differs between the tokens and the parameters, weights that are not a distribution.
"""
import pytest
import torch

from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from tests.probes import F64, NO_KEYS, W1, W2, W, Z, randn, sample


@pytest.mark.parametrize("call, name", [
    (lambda: fe.softmax_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.softmax_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.dot_product_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.dot_product_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.attention_step(Z, NO_KEYS, W, W, 1.0), "H"),
    (lambda: fe.linear_attention_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.multihead_free_energy(Z, NO_KEYS, W1, W2, 1.0), "H"),
    (lambda: fe.boltzmann_weights(torch.zeros(3, 0, dtype=F64), 1.0), "E"),
    (lambda: fe.helmholtz_free_energy(torch.zeros(3, 0, dtype=F64), 1.0), "E"),
    (lambda: fe.dot_product_weights(torch.zeros(3, 0, dtype=F64)), "scores"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


def test_fully_masked_row_gets_zero_weights_and_finite_gradients():
    s = randn(2, 4, 4).requires_grad_(True)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    mask[0] = False  # query 0 may attend to nothing
    a = fe.dot_product_weights(s, mask, beta=0.5)
    assert torch.equal(a[:, 0], torch.zeros(2, 4, dtype=F64))
    ref = torch.softmax((0.5 * s[:, 1:]).masked_fill(~mask[1:], float("-inf")), -1)
    assert torch.equal(a[:, 1:], ref)  # the other rows are exactly the plain masked softmax
    upstream = randn(2, 4, 4, seed=9)
    (grad,) = torch.autograd.grad((a * upstream).sum(), s)
    (ref_grad,) = torch.autograd.grad((ref * upstream[:, 1:]).sum(), s)
    assert torch.isfinite(grad).all() and torch.equal(grad[:, 0], torch.zeros(2, 4, dtype=F64))
    assert torch.equal(grad[:, 1:], ref_grad[:, 1:])
    assert torch.equal(ea.expressive_weights(s.detach(), mask)[:, 0], torch.zeros(2, 4, dtype=F64))


def test_dtype_message_names_both_arguments():
    z, params = sample("multihead_free_energy")
    with pytest.raises(TypeError, match=r"^H has dtype torch.float64, which differs from z \(torch.float32\): "
                                        r"they must match"):
        fe.multihead_free_energy(z.float(), params["H"], params["W1"], params["W2"], 1.0)


def test_free_energy_of_weights_refuses_weights_that_are_not_a_distribution():
    E = torch.tensor([[0.5, 1.0, 2.0]], dtype=F64)
    with pytest.raises(ValueError, match=r"p must sum to 1 over its last dim \(a distribution\), got a sum of 4"):
        fe.free_energy_of_weights(torch.tensor([[1.0, 1.0, 2.0]], dtype=F64), E, 1.0)
    with pytest.raises(ValueError, match="p must be non-negative"):
        fe.free_energy_of_weights(torch.tensor([[1.5, -0.5, 0.0]], dtype=F64), E, 1.0)


def test_free_energy_of_weights_at_the_boltzmann_weights_is_the_helmholtz_free_energy():
    """Valid p (float32 rounding of a softmax included) is accepted and F(p*) = F* (paper 000, eq. 3)."""
    E = torch.tensor([[0.5, 1.0, 2.0], [3.0, -1.0, 0.0]], dtype=F64)
    p = fe.boltzmann_weights(E, 0.7)
    assert torch.allclose(fe.free_energy_of_weights(p, E, 0.7), fe.helmholtz_free_energy(E, 0.7), rtol=1e-12)
    fe.free_energy_of_weights(p.float(), E.float(), 0.7)  # float32 sums within √eps of 1
