"""energylab.derive: a layer from an energy equals every catalog closed form, trains, and rejects bad energies."""
import subprocess
import sys

import pytest
import torch
from torch import nn

import energylab
from energylab import catalog
from energylab.forms import free_energy as fe
from energylab.forms import newton as nf
from energylab.layers.derived import CauchyEnergy
from energylab.layers.energy import EnergyLayer, derive

GRADIENT = [n for n, f in catalog.FORMS.items() if f.kind == "gradient"]
NEWTON = [n for n, f in catalog.FORMS.items() if f.kind == "newton"]


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_the_catalog_has_gradient_and_newton_forms():
    assert len(GRADIENT) >= 15 and {"att2nd", "mha2nd"} <= set(NEWTON)


@pytest.mark.parametrize("name", GRADIENT)
@pytest.mark.parametrize("n_tokens,dim", [(7, 5), (6, 6)])  # dim 6: multi-head forms draw 2 heads of size 3
def test_derived_layer_equals_every_gradient_closed_form(name, n_tokens, dim):
    form = catalog.FORMS[name]
    for trial in range(2):
        x, params = form.sample(max(n_tokens, form.min_tokens), dim, generator=_gen(100 * dim + trial))
        layer = derive(form.energy, constraint="sphere" if form.on_sphere else None, params=params)
        assert layer.verify(form.update, x) < 1e-10
        # and against the catalog's own autograd reference (the same gradient, computed once more by catalog)
        ref = catalog.reference_update(form, x, params)
        assert float((layer.update(x) - ref).norm() / ref.norm()) < 1e-12


@pytest.mark.parametrize("name", NEWTON)
def test_newton_kind_equals_the_catalog_newton_forms(name):
    form = catalog.FORMS[name]
    x, params = form.sample(5, 6, generator=_gen(3))
    layer = derive(form.energy, kind="newton", params=params, damping=0.0)
    assert layer.verify(form.update, x) < 1e-10


def test_newton_per_element_blocks_equal_the_whole_batch_solve():
    """A (B,) energy solves B small systems; the scalar energy one big block-diagonal one: same direction."""
    x, params = nf._sample_newton(6, 4, generator=_gen(5))
    per_query = derive(lambda z, **p: fe.softmax_free_energy(z, **p), kind="newton", params=params, damping=0.0)
    assert per_query.verify(nf.att2nd_update, x) < 1e-10
    damped = derive(lambda z, **p: fe.softmax_free_energy(z, **p), kind="newton", params=params, damping=0.5)
    assert damped.verify(nf.att2nd_update, x) > 1e-3  # damping changes the step: the check can fail


def test_verify_detects_a_wrong_closed_form_and_restores_the_dtype():
    form = catalog.FORMS["softmax_free_energy"]
    x, params = form.sample(7, 5, generator=_gen(1))
    W = nn.Parameter(params["W"].float())
    layer = derive(form.energy, params={**params, "W": W})
    assert layer.verify(lambda z, **p: 1.01 * form.update(z, **p), x) == pytest.approx(0.01 / 1.01, rel=1e-6)
    assert W.dtype == torch.float32 and layer.source.learned["W"] is W


def cauchy_update(x, E):
    """−∇E of energylab.layers.derived.CauchyEnergy, derived again here in another form (pairwise differences, the
    library's closed form uses matrix products): with w_ij = (1+‖q_i−k_j‖²)^{-1}, S_i = Σ_j w_ij, a_ij = w_ij²/S_i,
    −∂E/∂q_i = −2 Σ_j a_ij (q_i − k_j) and −∂E/∂k_j = 2 Σ_i a_ij (q_i − k_j), mapped back by W_qᵀ and W_kᵀ."""
    q = torch.einsum("hca,bna->bhnc", E.Wq, x)
    k = torch.einsum("hca,bna->bhnc", E.Wk, x)
    diff = q.unsqueeze(-2) - k.unsqueeze(-3)  # (B, H, N, N, d_h)
    w = (1 + diff.pow(2).sum(-1)).reciprocal()
    a = w.pow(2) / w.sum(-1, keepdim=True)
    gq = -2 * (a.unsqueeze(-1) * diff).sum(-2)  # (B, H, N, d_h)
    gk = 2 * (a.unsqueeze(-1) * diff).sum(-3)
    return torch.einsum("hca,bhnc->bna", E.Wq, gq) + torch.einsum("hca,bhnc->bna", E.Wk, gk)


def test_module_energy_with_heads_and_batches():
    E = CauchyEnergy(6, 2, generator=_gen(0))
    layer = derive(E, step=0.3)
    x = torch.randn(3, 5, 6, generator=_gen(2))
    assert layer.verify(lambda z: cauchy_update(z, E), x) < 1e-10
    assert layer.verify(E.closed_form, x) < 1e-10
    assert E.Wq.dtype == torch.float32
    one = layer.update(x[1:2])  # a batch is independent elements: element 1 alone gives the same direction
    assert torch.allclose(layer.update(x)[1:2], one, atol=1e-6)
    assert set(dict(layer.named_parameters())) == {"source.Wq", "source.Wk"}


def test_constraints_keep_rows_on_their_sphere_and_project_the_direction():
    form = catalog.FORMS["sphere_interaction"]
    x, params = form.sample(8, 4, generator=_gen(4))
    for constraint, radius in (("sphere", 1.0), ("rms", 2.0)):
        layer = derive(form.energy, constraint=constraint, params=params, step=0.2)
        y = layer(x * radius)
        assert torch.allclose(y.norm(dim=-1), torch.full((8,), radius, dtype=y.dtype), atol=1e-12)
        u = layer.update(x * radius)
        assert float((u * x).sum(-1).abs().max()) < 1e-12  # tangent
    free = derive(form.energy, params=params, step=0.2)
    assert float(free(x).norm(dim=-1).sub(1).abs().max()) > 1e-3  # without a constraint the rows leave the sphere


def test_gradients_reach_the_parameters_like_through_the_closed_form():
    """create_graph: the loss gradient through the derived layer equals the one through the closed form."""
    x, params = fe.sample_free_tokens(6, 4, generator=_gen(7))
    W = nn.Parameter(params["W"].clone())
    layer = derive(fe.dot_product_free_energy, params={**params, "W": W}, step=0.5)
    target = torch.randn(3, 4, dtype=torch.float64, generator=_gen(8))
    (layer(x) - target).pow(2).sum().backward()
    W2 = params["W"].clone().requires_grad_(True)
    y = x + 0.5 * fe.dot_product_free_energy_update(x, params["H"], W2, params["T"])
    (y - target).pow(2).sum().backward()
    assert torch.allclose(W.grad, W2.grad, atol=1e-12)
    with torch.no_grad():
        assert not layer(x).requires_grad


def test_a_derived_layer_trains_on_a_toy_task():
    """Denoising with a learned Hopfield energy E = −(1/β) log Σ_μ exp(β xᵀm_μ) + ½‖x‖²: two steps pull a noisy
    pattern to its memory; the memories M are learned from scratch. The loss falls by more than 25x."""
    torch.manual_seed(0)
    g = _gen(11)
    patterns = torch.randn(4, 8, generator=g).sign()

    def hopfield(x, M, beta):
        return -torch.logsumexp(beta * x @ M.T, -1) / beta + 0.5 * x.pow(2).sum(-1)

    layer = derive(hopfield, params={"M": nn.Parameter(0.1 * torch.randn(4, 8, generator=g)), "beta": 2.0},
                   step=0.5, learn_step=True)
    opt = torch.optim.Adam(layer.parameters(), lr=0.05)
    losses = []
    for _ in range(120):
        idx = torch.randint(0, 4, (32,), generator=g)
        noisy = patterns[idx] + 0.6 * torch.randn(32, 8, generator=g)
        loss = (layer(layer(noisy)) - patterns[idx]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert first > 0.25 and last < 0.01, (first, last)  # measured 0.3232 -> 0.0014


# ----------------------------------------------------------------------------- clear errors
def test_a_non_scalar_energy_is_named_with_its_shape():
    layer = derive(lambda x: x.pow(2).sum(-1))  # (B, N): one value per token, not per batch element
    with pytest.raises(ValueError, match=r"shape \(\) or \(2,\).*got shape \(2, 3\)"):
        layer.update(torch.randn(2, 3, 4))


def test_a_non_differentiable_energy_is_refused():
    with pytest.raises(TypeError, match="not differentiable"):
        derive(lambda x: x.detach().pow(2).sum()).update(torch.randn(2, 3))
    with pytest.raises(TypeError, match="not differentiable"):
        derive(lambda x: torch.tensor(1.0)).update(torch.randn(2, 3))


def test_nan_names_the_batch_elements():
    def energy(x):
        return torch.log(x[:, 0]) + x.pow(2).sum(-1)  # log of a negative first coordinate is NaN

    x = torch.tensor([[1.0, 2.0], [-1.0, 0.0], [2.0, 1.0], [-3.0, 1.0]])
    with pytest.raises(ValueError, match=r"energy is NaN or inf at batch elements \[1, 3\]"):
        derive(energy).update(x)
    with pytest.raises(ValueError, match="gradient of the energy is NaN or inf at batch element \\[0\\]"):
        derive(lambda x: x.abs().sqrt().sum(-1)).update(torch.tensor([[0.0, 1.0], [1.0, 2.0]]))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="kind must be one of"):
        derive(lambda x: x.sum(), kind="hessian")
    with pytest.raises(ValueError, match="constraint must be one of"):
        derive(lambda x: x.sum(), constraint="ball")
    with pytest.raises(TypeError, match="needs a method energy"):
        derive(nn.Module())
    with pytest.raises(TypeError, match="must return a torch.Tensor"):
        derive(lambda x: 1.0).update(torch.randn(2, 3))
    with pytest.raises(ValueError, match="params keys"):
        derive(lambda x: x.sum(), params={"not a name": 1.0})
    with pytest.raises(ValueError, match="singular"):
        derive(lambda x: (x[:, 0] ** 2).sum(), kind="newton", damping=0.0).update(torch.randn(2, 2))


# ----------------------------------------------------------------------------- energylab.derive is the function
def test_energylab_derive_is_the_function_whichever_import_comes_first():
    layer = energylab.derive(lambda x: x.pow(2).sum())
    assert isinstance(layer, EnergyLayer) and energylab.derive is derive
    for first in ("import energylab.layers.energy", "from energylab.layers.energy import EnergyLayer",
                  "import energylab"):
        code = (f"{first}\nimport energylab, torch\nfrom energylab import derive\n"
                "L = energylab.derive(lambda x: x.pow(2).sum(), step=0.25)\n"
                "print(float(L(torch.ones(2)).sum()), type(derive(lambda x: x.sum())).__name__)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == ["1.0", "EnergyLayer"]
