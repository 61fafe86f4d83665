"""The Newton forms of paper 000: exact Newton for general weights, the papers' layers against it (float64)."""
import torch

from energylab import catalog
from energylab.forms import newton as nw
from tests.probes import F64, gen, rel


def test_mha2nd_is_exact_newton_for_general_weights_and_the_papers_step_only_for_orthonormal_ones():
    z, p = catalog.FORMS["mha2nd"].sample(7, 15, generator=gen(2))  # general (non-orthonormal) W1
    W = p["W1"].reshape(15, 15)
    assert float((W @ W.T - torch.eye(15, dtype=F64)).norm()) > 0.5  # really not orthonormal
    newton = catalog.reference_update(catalog.FORMS["mha2nd"], z, p)
    assert rel(nw.mha2nd_update(**p, z=z), newton) < 1e-10
    assert rel(nw.mha2nd_paper_update(**p, z=z), newton) > 0.2  # footnote 7's inverse is far off here
    Q = torch.linalg.qr(torch.randn(15, 15, generator=gen(5), dtype=F64))[0]
    p = {**p, "W1": Q.reshape(p["W1"].shape)}  # orthogonal stacking: G = I, the paper's step is exact
    newton = catalog.reference_update(catalog.FORMS["mha2nd"], z, p)
    assert rel(nw.mha2nd_paper_update(**p, z=z), newton) < 1e-10
    assert rel(nw.mha2nd_update(**p, z=z), newton) < 1e-10


def test_corrected_mha2nd1st_tracks_newton_where_the_papers_layer_does_not():
    z, p = catalog.FORMS["mha2nd1st"].sample(7, 15, generator=gen(6))
    p = {**p, "H": 0.03 * p["H"]}  # small token spread: the first Taylor term is nearly exact
    newton = nw.mha2nd_update(z, **p)
    assert rel(nw.mha2nd1st_corrected_update(z, **p), newton) < 1e-3
    assert rel(nw.mha2nd1st_update(z, **p), nw.mha2nd_paper_update(z, **p)) < 1e-3
    assert rel(nw.mha2nd1st_update(z, **p), newton) > 0.1  # the paper's layer approximates its own step


def test_mha2nd1st_with_identity_G_and_the_dot_potential_on_a_sphere():
    # W1 = W2 = rows of a rotation, tokens with equal-norm head projections: elastic and dot weights agree
    g = gen(3)
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
    assert rel(a, b) < 1e-12
