"""drop_masked: zero (masked) spins left out of every softmax, as the authors' code does at t = 1; float64."""
import torch

from energylab.forms.local import local_attention_update
from energylab.models.attractor import AttractorConfig, BareSelfAttention
from energylab.sphere import normalize


def _models(n=7, a=2, d=5):
    g = torch.Generator().manual_seed(3)
    cfg = AttractorConfig(n_tokens=n, patch_pixels=a, dim=d, init="paper", lam_test=1.7)
    keep, drop = BareSelfAttention(cfg, g), BareSelfAttention(AttractorConfig(**{**cfg.__dict__, "drop_masked": True}))
    drop.load_state_dict(keep.state_dict())
    return keep.double(), drop.double()


def test_without_zero_spins_the_two_fields_agree():
    keep, drop = _models()
    x = normalize(torch.randn(3, 7, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64))
    assert torch.allclose(keep.field(x), drop.field(x), rtol=1e-12, atol=1e-14)
    assert torch.allclose(drop.field(x), local_attention_update(x, drop.J, 1.7), rtol=1e-12, atol=1e-14)


def test_zero_spins_leave_the_softmax_and_a_masked_field_keeps_its_direction():
    keep, drop = _models()
    x = normalize(torch.randn(2, 7, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    x[:, [1, 4]] = 0.0  # two masked tokens
    h_keep, h_drop = keep.field(x), drop.field(x)
    # by hand for token 0 of image 0: softmax over the visible j != 0 only
    J = drop.J.detach()
    visible = [2, 3, 5, 6]
    Jx = torch.stack([J[0, j] @ x[0, j] for j in visible])  # (4, d)
    alpha = torch.softmax(1.7 * Jx @ x[0, 0], 0)
    assert torch.allclose(h_drop[0, 0], alpha @ Jx, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(h_keep[0, 0], h_drop[0, 0])  # keeping them dilutes the weights
    # a masked token attends uniformly either way (6 others, 5 visible): same direction, 6/5 the length
    cos = torch.nn.functional.cosine_similarity(h_keep[:, 1], h_drop[:, 1], dim=-1)
    assert torch.allclose(cos, torch.ones(2, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h_drop[:, 1].norm(dim=-1) / h_keep[:, 1].norm(dim=-1),
                          torch.full((2,), 6 / 5, dtype=torch.float64), rtol=1e-12)
