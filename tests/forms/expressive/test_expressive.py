"""Expressive attention (paper 001): its weights from raw scores, and its identities beyond operator = autograd."""
import torch

from energylab import catalog
from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from tests.probes import gen, rel


def _scores(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_expressive_weights_are_boltzmann_weights_but_the_layer_is_not_the_gradient():
    z, p = catalog.FORMS["expressive_attention"].sample(7, 5, generator=gen(0))
    H, W, T = p["H"], p["W"], p["T"]
    s = -fe.dot_product_potentials(z, H, W)
    boltz = fe.boltzmann_weights(ea.expressive_potentials(z, H, W, T), T)
    assert rel(boltz, ea.expressive_weights(s)) < 1e-13
    # Lemma 1 carries over: the free energy of the EA weights is the Helmholtz free energy
    E = ea.expressive_potentials(z, H, W, T)
    assert rel(fe.free_energy_of_weights(boltz, E, T), ea.expressive_free_energy(z, H, W, T)) < 1e-12
    # ... but the EA layer output is not −∇F_EA (not even parallel to it)
    layer = ea.expressive_attention_step(z, H, W, W) - z
    grad = ea.expressive_free_energy_update(z, H, W, T)
    cos = (layer * grad).sum(-1) / (layer.norm(dim=-1) * grad.norm(dim=-1))
    assert (cos < 0.999).all()


def test_expressive_weights_hand_value_and_symmetry():
    s = torch.tensor([[1.0, -1.0, 0.0, 2.0]], dtype=torch.float64)
    w = ea.expressive_weights(s)
    raw = torch.tensor([0.5, 0.5, 0.0, 0.8], dtype=torch.float64)
    assert torch.allclose(w[0], raw / raw.sum(), rtol=1e-14, atol=0)
    x = _scores(1, 3, 5, 5)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(ea.expressive_weights(x, mask), ea.expressive_weights(-x, mask))  # even in the score
    assert (ea.expressive_weights(x, mask).masked_select(~mask) == 0).all()
    assert torch.allclose(ea.expressive_weights(x, mask).sum(-1), torch.ones(3, 5, dtype=torch.float64))
    assert torch.equal(ea.expressive_weights(torch.zeros(1, 3)), torch.zeros(1, 3))  # no NaN on zero rows
