"""Paper-specific identities of the catalog forms beyond operator = autograd (float64, fixed seeds)."""
import math

import pytest
import torch

from energylab import catalog
from energylab import sphere as sp
from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from energylab.forms import hopfield as hf
from energylab.forms import hyperspherical as hs
from energylab.forms import local as lo
from energylab.forms import newton as nw
from energylab.forms import sphere as fs

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_expressive_weights_are_boltzmann_weights_but_the_layer_is_not_the_gradient():
    z, p = catalog.FORMS["expressive_attention"].sample(7, 5, generator=_gen(0))
    H, W, T = p["H"], p["W"], p["T"]
    s = -fe.dot_product_potentials(z, H, W)
    boltz = fe.boltzmann_weights(ea.expressive_potentials(z, H, W, T), T)
    assert _rel(boltz, ea.expressive_weights(s)) < 1e-13
    # Lemma 1 carries over: the free energy of the EA weights is the Helmholtz free energy
    E = ea.expressive_potentials(z, H, W, T)
    assert _rel(fe.free_energy_of_weights(boltz, E, T), ea.expressive_free_energy(z, H, W, T)) < 1e-12
    # ... but the EA layer output is not −∇F_EA (not even parallel to it)
    layer = ea.expressive_attention_step(z, H, W, W) - z
    grad = ea.expressive_free_energy_update(z, H, W, T)
    cos = (layer * grad).sum(-1) / (layer.norm(dim=-1) * grad.norm(dim=-1))
    assert (cos < 0.999).all()


def test_linear_attention_is_a_gradient_step_with_eta_T():
    z, p = catalog.FORMS["linear_attention"].sample(7, 5, generator=_gen(1))
    H, W, T = p["H"], p["W"], p["T"]
    eta = 0.3
    step = z + eta * fe.linear_attention_update(z, H, W, T)
    scores = z @ W @ H.T  # zᵀ W_QᵀW_K h_i with W_QᵀW_K = W
    linear_attention = z + scores @ (H @ (eta * T * W).T)  # eq. 13 with W_V = ηT W
    assert _rel(step, linear_attention) < 1e-13


def test_mha2nd_is_exact_newton_for_general_weights_and_the_papers_step_only_for_orthonormal_ones():
    z, p = catalog.FORMS["mha2nd"].sample(7, 15, generator=_gen(2))  # general (non-orthonormal) W1
    W = p["W1"].reshape(15, 15)
    assert float((W @ W.T - torch.eye(15, dtype=F64)).norm()) > 0.5  # really not orthonormal
    newton = catalog.reference_update(catalog.FORMS["mha2nd"], z, p)
    assert _rel(nw.mha2nd_update(**p, z=z), newton) < 1e-10
    assert _rel(nw.mha2nd_paper_update(**p, z=z), newton) > 0.2  # footnote 7's inverse is far off here
    Q = torch.linalg.qr(torch.randn(15, 15, generator=_gen(5), dtype=F64))[0]
    p = {**p, "W1": Q.reshape(p["W1"].shape)}  # orthogonal stacking: G = I, the paper's step is exact
    newton = catalog.reference_update(catalog.FORMS["mha2nd"], z, p)
    assert _rel(nw.mha2nd_paper_update(**p, z=z), newton) < 1e-10
    assert _rel(nw.mha2nd_update(**p, z=z), newton) < 1e-10


def test_corrected_mha2nd1st_tracks_newton_where_the_papers_layer_does_not():
    z, p = catalog.FORMS["mha2nd1st"].sample(7, 15, generator=_gen(6))
    p = {**p, "H": 0.03 * p["H"]}  # small token spread: the first Taylor term is nearly exact
    newton = nw.mha2nd_update(z, **p)
    assert _rel(nw.mha2nd1st_corrected_update(z, **p), newton) < 1e-3
    assert _rel(nw.mha2nd1st_update(z, **p), nw.mha2nd_paper_update(z, **p)) < 1e-3
    assert _rel(nw.mha2nd1st_update(z, **p), newton) > 0.1  # the paper's layer approximates its own step


def test_mha2nd1st_with_identity_G_and_the_dot_potential_on_a_sphere():
    # W1 = W2 = rows of a rotation, tokens with equal-norm head projections: elastic and dot weights agree
    g = _gen(3)
    d, heads = 6, 2
    Q = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=F64))[0]
    W1 = Q.reshape(heads, d // heads, d)
    u = torch.randn(5, heads, d // heads, generator=g, dtype=F64)
    u = u / u.norm(dim=-1, keepdim=True)  # each head projection of each token has norm 1
    H = torch.einsum("hca,ihc->ia", W1, u)
    v = torch.randn(heads, d // heads, generator=g, dtype=F64)
    z = torch.einsum("hca,hc->a", W1, v / v.norm(dim=-1, keepdim=True))
    a = nw.mha2nd1st_update(z, H, W1, W1, 0.7, potential="elastic")
    b = nw.mha2nd1st_update(z, H, W1, W1, 0.7, potential="dot")
    assert _rel(a, b) < 1e-12


def test_hopfield_retrieves_a_pattern_in_one_step():
    g = _gen(4)
    X = torch.randn(6, 32, generator=g, dtype=F64)
    xi = X[2] + 0.3 * torch.randn(32, generator=g, dtype=F64)
    retrieved = xi + hf.hopfield_update(xi, X, beta=4.0)
    assert _rel(retrieved, X[2]) < 1e-6
    assert float(hf.hopfield_energy(retrieved, X, 4.0)) < float(hf.hopfield_energy(xi, X, 4.0))


def test_local_energy_update_is_self_attention_at_the_context():
    x, p = catalog.FORMS["local_self_attention"].sample(5, 3, generator=_gen(5))
    J, lam = p["J"], p["lam"]
    out = lo.local_attention_update(x, J, lam)
    for i in range(5):
        js = [j for j in range(5) if j != i]
        logits = torch.stack([lam * x[i] @ J[i, j] @ x[j] for j in js])
        alpha = torch.softmax(logits, 0)
        expected = sum(a * (J[i, j] @ x[j]) for a, j in zip(alpha, js))
        assert _rel(out[i], expected) < 1e-13


@pytest.mark.parametrize("name", ["sphere_interaction", "symmetric_self_attention"])
def test_softmax_normalised_dynamics_still_descend(name):
    form = catalog.FORMS[name]
    x, p = form.sample(9, 5, generator=_gen(6))
    A = p.get("A", torch.eye(5, dtype=F64))
    scores = torch.exp(p["beta"] * x @ A @ x.T)
    softmax_field = sp.tangent_projection(x, (scores / scores.sum(-1, keepdim=True)) @ x @ A)
    grad_field = form.update(x, **p)
    assert (((softmax_field * grad_field).sum(-1)) > 0).all()  # a positive rescaling per token
    e0 = float(form.energy(x, **p))
    assert float(form.energy(sp.sphere_step(x, softmax_field, 1e-3), **p)) < e0
    if name == "sphere_interaction":  # USA velocity = n × the tangent gradient
        usa = sp.tangent_projection(x, scores @ x / 9)
        assert _rel(usa, 9 * grad_field) < 1e-13


def test_hyperset_rms_operators_agree_on_the_constraint_set():
    g = _gen(7)
    d, heads, n = 6, 2, 5
    p = d // heads
    W = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=F64))[0]
    u = torch.randn(n, heads, p, generator=g, dtype=F64)
    z = math.sqrt(p) * u / u.norm(dim=-1, keepdim=True)  # ‖W_hᵀ x_i‖ = √p
    X = z.flatten(-2) @ W.T
    W = W.T.reshape(heads, p, d)  # (H, d_h, d): W_h = the former column block W_hᵀ
    for fn in (hs.hyperset_attention_update, hs.sigmoid_attention_update, hs.kernel_linear_attention_update):
        assert _rel(fn(X, W, 0.5, rms=True), fn(X, W, 0.5)) < 1e-13
    D = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=F64))[0]
    Xd = math.sqrt(d) * torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=F64), dim=-1) @ D.T
    for fn in (hs.hyperset_feedforward_update, hs.softmax_feedforward_update, hs.gated_feedforward_update):
        assert _rel(fn(Xd, D, rms=True), fn(Xd, D)) < 1e-13


def test_hyperset_bad_input():
    X = torch.randn(5, 6, dtype=F64)
    with pytest.raises(ValueError, match="W"):
        hs.hyperset_attention_update(X, torch.eye(6, dtype=F64), 0.5)  # (d, d), not (H, d_h, d)
    with pytest.raises(ValueError, match="W"):
        hs.sigmoid_attention_update(X, torch.eye(5, dtype=F64).reshape(1, 5, 5), 0.5)
    with pytest.raises(ValueError, match="beta"):
        hs.kernel_linear_attention_update(X, torch.eye(6, dtype=F64).reshape(2, 3, 6), 0.0)
    with pytest.raises(ValueError, match="D"):
        hs.gated_feedforward_update(X, torch.eye(5, dtype=F64))
    with pytest.raises(ValueError, match="A"):
        fs.symmetric_attention_energy(X, torch.randn(6, 6, dtype=F64), 1.0)
    with pytest.raises(ValueError, match="J"):
        lo.local_attention_update(X, torch.zeros(5, 5, 6, 5, dtype=F64), 1.0)
