"""Local self-attention (the attractor networks of chapter 7): identities beyond operator = autograd."""
import torch

from energylab import catalog
from energylab.forms import local as lo
from tests.probes import gen, rel


def test_local_energy_update_is_self_attention_at_the_context():
    x, p = catalog.FORMS["local_self_attention"].sample(5, 3, generator=gen(5))
    J, lam = p["J"], p["lam"]
    out = lo.local_attention_update(x, J, lam)
    for i in range(5):
        js = [j for j in range(5) if j != i]
        logits = torch.stack([lam * x[i] @ J[i, j] @ x[j] for j in js])
        alpha = torch.softmax(logits, 0)
        expected = sum(a * (J[i, j] @ x[j]) for a, j in zip(alpha, js))
        assert rel(out[i], expected) < 1e-13
