"""Bad input to the Newton forms (issues 13 and 35): empty token sets, zero heads, float16."""
import pytest
import torch

from energylab import catalog
from energylab.forms import newton as nw
from tests.probes import F64, NO_KEYS, W1, W2, W, Z, sample, zero_heads


@pytest.mark.parametrize("call, name", [
    (lambda: nw.att2nd_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: nw.mha2nd1st_update(Z, NO_KEYS, W1, W2, 1.0), "H"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


@pytest.mark.parametrize("name", ["multihead_free_energy", "mha2nd", "mha2nd-paper", "mha2nd1st",
                                  "mha2nd1st-corrected"])
@pytest.mark.parametrize("part", ["energy", "update"])
def test_multi_head_forms_refuse_zero_heads(name, part):
    z, params = sample(name)
    params = {**params, "W1": zero_heads(params["W1"]), "W2": zero_heads(params["W2"])}
    with pytest.raises(ValueError, match=r"W1 must hold at least 1 head, got shape \(0, .*H ≥ 1"):
        getattr(catalog.FORMS[name], part)(z, **params)


@pytest.mark.parametrize("name", ["att2nd", "mha2nd", "mha2nd-paper", "mha2nd1st-corrected"])
def test_newton_forms_in_float16_are_finite_and_close_to_float64(name):
    z, params = sample(name, dtype=F64)
    exact = catalog.FORMS[name].update(z, **params)
    half = {k: v.half() if isinstance(v, torch.Tensor) else v for k, v in params.items()}
    u = catalog.FORMS[name].update(z.half(), **half)
    assert u.dtype == torch.float16 and torch.isfinite(u).all()
    assert float((u.double() - exact).norm() / exact.norm()) < 2e-2  # float16 keeps ~3 digits


def test_newton_solve_keeps_float64_exact():
    z, params = sample("att2nd")
    assert catalog.verify("att2nd", trials=2) < 1e-10
    assert nw.att2nd_update(z, **params).dtype == F64
