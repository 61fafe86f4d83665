"""Bad input to the attention forms (issue 35): a clear error naming the argument, or a finite, correct result.

Kinds: the paper-003 forms at large beta (overflow), zero heads, a dtype that differs between the tokens and the
parameters, float16 Newton forms, a wrong last dim or a 1-D x for the paper-003 forms, and weights that are not a
distribution in ``free_energy_of_weights``.
"""
import math

import pytest
import torch

from energylab import catalog
from energylab.forms import free_energy as fe
from energylab.forms import hyperspherical as hs
from energylab.forms import newton as nw
from energylab.forms import recurrent as rc
from energylab.forms import sphere as fs

F64 = torch.float64


def _sample(name, n=5, d=6, seed=0, dtype=F64):
    return catalog.FORMS[name].sample(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ----------------------------------------------------------------------------- paper 003 at large beta
PAPER_003 = ("generalised_symmetric_sa", "multihead_symmetric_sa")


@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_at_huge_beta_name_beta_and_the_safe_range(name, part):
    x, params = _sample(name)
    form = catalog.FORMS[name]
    with pytest.raises(ValueError, match=r"beta=10000 is too large for torch.float64: .* overflows; the safe range"):
        getattr(form, part)(x, **{**params, "beta": 1e4})


@pytest.mark.parametrize("name", PAPER_003)
def test_paper_003_forms_just_below_the_overflow_limit_are_finite_and_exact(name):
    """The largest beta whose exponentials fit float64: energy and update finite, and update = −∇E still."""
    x, params = _sample(name)
    form = catalog.FORMS[name]
    maps = (rc._prop41_map(x, params["W_Q"], params["W_K"], params["W_V"]) if name == PAPER_003[0]
            else rc.prop42_maps(params["U"], params["Lam"]))
    scores = torch.einsum("ia,...ab,jb->...ij", x, maps, x)
    beta = 0.97 * (math.log(torch.finfo(F64).max) - math.log(x.shape[0] ** 2)) / float(scores.max())
    params = {**params, "beta": beta}
    E, u = form.energy(x, **params), form.update(x, **params)
    assert torch.isfinite(E) and torch.isfinite(u).all()
    ref = catalog.reference_update(form, x, params)
    scale = ref.abs().max()  # near 1e300: divide before the norm squares it
    assert float(((u - ref) / scale).norm() / (ref / scale).norm()) < 1e-10


def test_exp_energy_checks_its_map():
    x, _ = _sample("multihead_symmetric_sa")
    with pytest.raises(ValueError, match=r"A must have shape \(d, d\) or \(H, d, d\) with d = 6"):
        rc.exp_energy(x, torch.eye(5, dtype=F64), 1.0)


# ----------------------------------------------------------------------------- wrong last dim, 1-D x
@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_name_x_for_a_wrong_last_dim(name, part):
    x, params = _sample(name)
    with pytest.raises(ValueError, match=r"^x.*(last dim|last dimension).* 6.*got.*5|^W_Q must have shape \(5, 5\)"):
        getattr(catalog.FORMS[name], part)(x[:, :5], **params)


@pytest.mark.parametrize("name", PAPER_003)
@pytest.mark.parametrize("part", ["energy", "update"])
def test_paper_003_forms_name_x_for_a_single_vector(name, part):
    x, params = _sample(name)
    with pytest.raises(ValueError, match=r"x must have at least 2 dims \(\.\.\., N, d\), got shape \(6,\)"):
        getattr(catalog.FORMS[name], part)(x[0], **params)


# ----------------------------------------------------------------------------- zero heads
def _zero_heads(t):
    return t[:0]


@pytest.mark.parametrize("name", ["multihead_free_energy", "mha2nd", "mha2nd-paper", "mha2nd1st",
                                  "mha2nd1st-corrected"])
@pytest.mark.parametrize("part", ["energy", "update"])
def test_multi_head_forms_refuse_zero_heads(name, part):
    z, params = _sample(name)
    params = {**params, "W1": _zero_heads(params["W1"]), "W2": _zero_heads(params["W2"])}
    with pytest.raises(ValueError, match=r"W1 must hold at least 1 head, got shape \(0, .*H ≥ 1"):
        getattr(catalog.FORMS[name], part)(z, **params)


@pytest.mark.parametrize("name", ["hyperset_attention", "sigmoid_attention", "kernel_linear_attention"])
@pytest.mark.parametrize("part", ["energy", "update"])
def test_hyperset_forms_refuse_zero_heads(name, part):
    X, params = _sample(name)
    with pytest.raises(ValueError, match=r"W must hold at least 1 head"):
        getattr(catalog.FORMS[name], part)(X, **{**params, "W": _zero_heads(params["W"])})


def test_sphere_energy_and_prop42_refuse_zero_heads():
    x, _ = _sample("sphere_interaction")
    Q = torch.zeros(0, 3, 6, dtype=F64)
    with pytest.raises(ValueError, match="Q must hold at least 1 head"):
        fs.sphere_interaction_energy(x, 1.0, Q, Q)
    x, params = _sample("multihead_symmetric_sa")
    with pytest.raises(ValueError, match="Lam must hold at least 1 head"):
        rc.prop42_update(x, params["U"], params["Lam"][:0], 1.0)


# ----------------------------------------------------------------------------- dtype mismatch
def _forms_with_tensor_params():
    out = []
    for name, form in catalog.FORMS.items():
        _, params = form.sample(4, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
        if any(isinstance(v, torch.Tensor) for v in params.values()):
            out.append(name)
    return out


@pytest.mark.parametrize("name", _forms_with_tensor_params())
@pytest.mark.parametrize("part", ["energy", "update"])
def test_a_float32_input_with_float64_parameters_is_named(name, part):
    x, params = _sample(name)
    with pytest.raises(TypeError, match=r"has dtype torch.float64, which differs from \w+ \(torch.float32\)"):
        getattr(catalog.FORMS[name], part)(x.float(), **params)


def test_every_form_with_parameters_is_covered():
    assert len(_forms_with_tensor_params()) >= 19  # the issue counted 19 catalog forms


def test_dtype_message_names_both_arguments():
    z, params = _sample("multihead_free_energy")
    with pytest.raises(TypeError, match=r"^H has dtype torch.float64, which differs from z \(torch.float32\): "
                                        r"they must match"):
        fe.multihead_free_energy(z.float(), params["H"], params["W1"], params["W2"], 1.0)


# ----------------------------------------------------------------------------- float16 Newton forms
@pytest.mark.parametrize("name", ["att2nd", "mha2nd", "mha2nd-paper", "mha2nd1st-corrected"])
def test_newton_forms_in_float16_are_finite_and_close_to_float64(name):
    z, params = _sample(name, dtype=F64)
    exact = catalog.FORMS[name].update(z, **params)
    half = {k: v.half() if isinstance(v, torch.Tensor) else v for k, v in params.items()}
    u = catalog.FORMS[name].update(z.half(), **half)
    assert u.dtype == torch.float16 and torch.isfinite(u).all()
    assert float((u.double() - exact).norm() / exact.norm()) < 2e-2  # float16 keeps ~3 digits


# ----------------------------------------------------------------------------- free energy of weights
def test_free_energy_of_weights_refuses_weights_that_are_not_a_distribution():
    E = torch.tensor([[0.5, 1.0, 2.0]], dtype=F64)
    with pytest.raises(ValueError, match=r"p must sum to 1 over its last dim \(a distribution\), got a sum of 4"):
        fe.free_energy_of_weights(torch.tensor([[1.0, 1.0, 2.0]], dtype=F64), E, 1.0)
    with pytest.raises(ValueError, match="p must be non-negative"):
        fe.free_energy_of_weights(torch.tensor([[1.5, -0.5, 0.0]], dtype=F64), E, 1.0)


def test_free_energy_of_weights_at_the_boltzmann_weights_is_the_helmholtz_free_energy():
    """Valid p (float32 rounding of a softmax included) is accepted and F(p*) = F* (paper 000, eq. 3)."""
    E = torch.tensor([[0.5, 1.0, 2.0], [3.0, -1.0, 0.0]], dtype=F64)
    p = fe.boltzmann_weights(E, 0.7)
    assert torch.allclose(fe.free_energy_of_weights(p, E, 0.7), fe.helmholtz_free_energy(E, 0.7), rtol=1e-12)
    fe.free_energy_of_weights(p.float(), E.float(), 0.7)  # float32 sums within √eps of 1


def test_hyperset_feedforward_names_the_dictionary_dtype():
    X, params = _sample("hyperset_feedforward")
    with pytest.raises(TypeError, match=r"D has dtype torch.float64, which differs from X \(torch.float32\)"):
        hs.hyperset_feedforward_update(X.float(), params["D"])


def test_newton_solve_keeps_float64_exact():
    z, params = _sample("att2nd")
    assert catalog.verify("att2nd", trials=2) < 1e-10
    assert nw.att2nd_update(z, **params).dtype == F64
