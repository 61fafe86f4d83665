"""The interaction energy on the sphere and symmetric self-attention: identities beyond operator = autograd."""
import pytest
import torch

from energylab import catalog
from energylab import sphere as sp
from tests.probes import F64, gen, rel


@pytest.mark.parametrize("name", ["sphere_interaction", "symmetric_self_attention"])
def test_softmax_normalised_dynamics_still_descend(name):
    form = catalog.FORMS[name]
    x, p = form.sample(9, 5, generator=gen(6))
    A = p.get("A", torch.eye(5, dtype=F64))
    scores = torch.exp(p["beta"] * x @ A @ x.T)
    softmax_field = sp.tangent_projection(x, (scores / scores.sum(-1, keepdim=True)) @ x @ A)
    grad_field = form.update(x, **p)
    assert (((softmax_field * grad_field).sum(-1)) > 0).all()  # a positive rescaling per token
    e0 = float(form.energy(x, **p))
    assert float(form.energy(sp.sphere_step(x, softmax_field, 1e-3), **p)) < e0
    if name == "sphere_interaction":  # USA velocity = n × the tangent gradient
        usa = sp.tangent_projection(x, scores @ x / 9)
        assert rel(usa, 9 * grad_field) < 1e-13
