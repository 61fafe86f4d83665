"""Bare self-attention as an attractor network: local energies, their fields, the local gradient, dynamics."""
import pytest
import torch

from energylab.models import attractor as at

B, N, D, A = 3, 5, 7, 2  # distinct primes (a = 2 pixels -> 4 spin inputs <= d = 7)


def _rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.fixture
def sample():
    g = torch.Generator().manual_seed(0)
    x = at.normalize_spins(torch.randn(B, N, D, generator=g, dtype=torch.float64))
    J = 0.4 * torch.randn(N, N, D, D, generator=g, dtype=torch.float64)
    J = J * (1 - torch.eye(N, dtype=torch.float64)).reshape(N, N, 1, 1)
    return x, J


def test_embedding_is_orthonormal_up_to_scale_and_invertible():
    torch.set_default_dtype(torch.float64)
    try:
        F = at.orthonormal_embedding(D, 2 * A, torch.Generator().manual_seed(1))
        assert F.shape == (D, 2 * A)
        assert float((F.T @ F - torch.eye(2 * A) / A).abs().max()) < 1e-14
        m = at.BareSelfAttention(at.AttractorConfig(n_tokens=N, patch_pixels=A, dim=D), torch.Generator().manual_seed(1))
        p = torch.rand(B, N, A, generator=torch.Generator().manual_seed(2))
        s = torch.stack([p, 1 - p], -1)
        s = (s / s.norm(dim=-1, keepdim=True)).flatten(-2)  # the pixel spins of tasks.images
        x = m.embed(s)
        assert float((x.norm(dim=-1) - 1).abs().max()) < 1e-14  # patches land on the unit sphere
        assert float((m.de_embed(x) - s).abs().max()) < 1e-12
    finally:
        torch.set_default_dtype(torch.float32)
    with pytest.raises(ValueError, match="inputs"):
        at.orthonormal_embedding(3, 4)


def test_local_energy_matches_a_hand_loop(sample):
    x, J = sample
    lam = 2.3
    e = at.local_energies(x, J, lam)
    b, i = 1, 3
    z = torch.stack([x[b, i] @ J[i, j] @ x[b, j] for j in range(N) if j != i])
    assert abs(float(e[b, i] + torch.logsumexp(lam * z, 0) / lam)) < 1e-12


@pytest.mark.parametrize("masked", [False, True])
def test_field_is_minus_gradient_of_own_local_energy(sample, masked):
    x, J = sample
    key_mask = torch.zeros(B, N, dtype=torch.bool)
    if masked:
        key_mask[:, 1] = True
        key_mask[0, 4] = True
    x = x.clone().requires_grad_(True)
    e = at.local_energies(x, J, 1.7, key_mask=key_mask)
    h, alpha = at.local_field(x.detach(), J, 1.7, key_mask=key_mask)
    # d e_i / d x_i only: sum over i of the diagonal blocks of the Jacobian
    grads = torch.stack([torch.autograd.grad(e[:, i].sum(), x, retain_graph=True)[0][:, i] for i in range(N)], 1)
    assert _rel(h, -grads) < 1e-10
    assert torch.allclose(alpha.sum(-1), torch.ones(B, N, dtype=torch.float64), atol=1e-14)
    assert float(alpha.diagonal(dim1=1, dim2=2).abs().max()) == 0.0  # j != i
    if masked:
        assert float(alpha[:, :, 1].abs().max()) == 0.0


def test_the_update_has_no_global_energy(sample):
    """A global energy E would make the Jacobian of -grad E symmetric; self-attention's is not."""
    x, J = sample
    field = lambda v: at.local_field(v.unsqueeze(0), J, 1.0)[0][0]  # noqa: E731
    jac = torch.autograd.functional.jacobian(field, x[0]).reshape(N * D, N * D)
    asym = float((jac - jac.T).norm() / jac.norm())
    assert asym > 0.1


def test_pseudo_likelihood_gradient_is_local(sample):
    x, J = sample
    J = J.clone().requires_grad_(True)
    e = at.local_energies(x, J, 3.1)
    i = 2
    (g_i,) = torch.autograd.grad(e[:, i].sum(), J, retain_graph=True)
    outside = torch.cat([g_i[:i], g_i[i + 1:]])
    assert float(outside.abs().max()) == 0.0 and float(g_i[i].abs().max()) > 1e-3  # only the couplings into i
    (g,) = torch.autograd.grad(e.sum(-1).mean(), J)
    assert _rel(at.local_gradient(x, J.detach(), 3.1), g) < 1e-10  # -alpha_ij x_i x_j^T, averaged over the batch


def test_model_init_norm_fixing_and_one_site_loss():
    cfg = at.AttractorConfig(n_tokens=N, patch_pixels=A, dim=D, logit_clamp=None)
    m = at.BareSelfAttention(cfg, torch.Generator().manual_seed(3))
    assert m.n_couplings == N * N * D * D
    assert float(m.J.detach().diagonal(dim1=0, dim2=1).abs().max()) == 0.0
    assert float(m.J.abs().max()) <= 1 / (2 * D * D)
    rms0 = float(m.j_rms)
    with torch.no_grad():
        m.J.mul_(3.0).add_(0.01)  # an optimiser step that inflates J and fills the diagonal
    m.fix_norm_()
    assert abs(float(m.J.pow(2).mean().sqrt()) - rms0) < 1e-7 * rms0
    assert float(m.J.detach().diagonal(dim1=0, dim2=1).abs().max()) == 0.0
    s = torch.rand(B, N, 2 * A, generator=torch.Generator().manual_seed(4))
    sites = torch.tensor([4, 0, 2])
    assert torch.allclose(m(s, sites), m(s)[torch.arange(B), sites], atol=1e-6)
    with pytest.raises(ValueError, match="init"):
        at.BareSelfAttention(at.AttractorConfig(init="xavier"))


def test_dynamics_stay_on_sphere_and_one_token_step_lowers_its_energy(sample):
    x, J = sample
    cfg = at.AttractorConfig(n_tokens=N, patch_pixels=A, dim=D, logit_clamp=None, eta=0.01)
    m = at.BareSelfAttention(cfg).double()
    with torch.no_grad():
        m.J.copy_(J)
    traj = m.run(x, 4)
    assert traj.shape == (5, B, N, D) and torch.equal(traj[0], x)
    assert float((traj[1:].norm(dim=-1) - 1).abs().max()) < 1e-12
    # move token 2 alone by a small step: its own local energy falls (the others are held fixed)
    y = x.clone()
    y[:, 2] = m.step(x)[:, 2]
    e0, e1 = at.local_energies(x, J, 1.0)[:, 2], at.local_energies(y, J, 1.0)[:, 2]
    assert bool((e1 < e0).all())
    # a masked (zero) token is not attended to in the first step and receives the mean field of the others
    x0 = x.clone()
    x0[:, 1] = 0.0
    km = torch.zeros(B, N, dtype=torch.bool)
    km[:, 1] = True
    h, alpha = at.local_field(x0, J, 1.0, key_mask=km)
    assert torch.allclose(alpha[:, 1, [0, 2, 3, 4]], torch.full((B, 4), 0.25, dtype=torch.float64))
    with pytest.raises(ValueError, match="steps"):
        m.run(x, -1)
    with pytest.raises(ValueError, match="key_mask"):
        at.local_energies(x, J, key_mask=torch.zeros(B, N))
