"""Bad input to the paper-003 forms (issue 35): a clear error naming the argument, or a finite, correct result.

Kinds: large beta (overflow), a wrong last dim or a 1-D x, zero heads (with the sphere energy's).
"""
import math

import pytest
import torch

from energylab import catalog
from energylab.forms import recurrent as rc
from energylab.forms import sphere as fs
from tests.probes import F64, sample

# ----------------------------------------------------------------------------- paper 003 at large beta
PAPER_003 = ("generalised_symmetric_sa", "multihead_symmetric_sa")


@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_at_huge_beta_name_beta_and_the_safe_range(name, part):
    x, params = sample(name)
    form = catalog.FORMS[name]
    with pytest.raises(ValueError, match=r"beta=10000 is too large for torch.float64: .* overflows; the safe range"):
        getattr(form, part)(x, **{**params, "beta": 1e4})


@pytest.mark.parametrize("name", PAPER_003)
def test_paper_003_forms_just_below_the_overflow_limit_are_finite_and_exact(name):
    """The largest beta whose exponentials fit float64: energy and update finite, and update = −∇E still."""
    x, params = sample(name)
    form = catalog.FORMS[name]
    maps = (rc._generalised_symmetric_map(x, params["W_Q"], params["W_K"], params["W_V"]) if name == PAPER_003[0]
            else rc.orthogonal_head_maps(params["U"], params["Lam"]))
    scores = torch.einsum("ia,...ab,jb->...ij", x, maps, x)
    beta = 0.97 * (math.log(torch.finfo(F64).max) - math.log(x.shape[0] ** 2)) / float(scores.max())
    params = {**params, "beta": beta}
    E, u = form.energy(x, **params), form.update(x, **params)
    assert torch.isfinite(E) and torch.isfinite(u).all()
    ref = catalog.reference_update(form, x, params)
    scale = ref.abs().max()  # near 1e300: divide before the norm squares it
    assert float(((u - ref) / scale).norm() / (ref / scale).norm()) < 1e-10


def test_exp_energy_checks_its_map():
    x, _ = sample("multihead_symmetric_sa")
    with pytest.raises(ValueError, match=r"A must have shape \(d, d\) or \(H, d, d\) with d = 6"):
        rc.exp_energy(x, torch.eye(5, dtype=F64), 1.0)


# ----------------------------------------------------------------------------- wrong last dim, 1-D x
@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_name_x_for_a_wrong_last_dim(name, part):
    x, params = sample(name)
    with pytest.raises(ValueError, match=r"^x.*(last dim|last dimension).* 6.*got.*5|^W_Q must have shape \(5, 5\)"):
        getattr(catalog.FORMS[name], part)(x[:, :5], **params)


@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_name_x_for_a_single_vector(name, part):
    x, params = sample(name)
    with pytest.raises(ValueError, match=r"x must have at least 2 dims \(\.\.\., N, d\), got shape \(6,\)"):
        getattr(catalog.FORMS[name], part)(x[0], **params)


# ----------------------------------------------------------------------------- zero heads


def test_sphere_energy_and_multihead_symmetric_sa_refuse_zero_heads():
    x, _ = sample("sphere_interaction")
    Q = torch.zeros(0, 3, 6, dtype=F64)
    with pytest.raises(ValueError, match="Q must hold at least 1 head"):
        fs.sphere_interaction_energy(x, 1.0, Q, Q)
    x, params = sample("multihead_symmetric_sa")
    with pytest.raises(ValueError, match="Lam must hold at least 1 head"):
        rc.multihead_symmetric_update(x, params["U"], params["Lam"][:0], 1.0)
