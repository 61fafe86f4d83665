"""Bad input to the catalog (issues 13 and 35): empty or mistyped verify sizes, and for every form with parameters a
float32 input with float64 parameters.
"""
import numpy as np
import pytest
import torch

from energylab import catalog, descent
from energylab.forms import free_energy as fe
from tests.probes import F64, sample


@pytest.mark.parametrize("kwargs, name", [({"n_tokens": 0}, "n_tokens"), ({"n_tokens": -1}, "n_tokens"),
                                          ({"dim": 0}, "dim"), ({"trials": 0}, "trials")])
def test_verify_refuses_empty_instances(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be an int >= 1"):
        catalog.verify("softmax_free_energy", **kwargs)


def test_verify_sizes_per_form_and_types():
    with pytest.raises(ValueError, match="^n_tokens must be an int >= 2"):
        catalog.verify("local_self_attention", n_tokens=1)
    with pytest.raises(TypeError, match="^n_tokens must be an int"):
        catalog.verify("softmax_free_energy", n_tokens=2.5)
    with pytest.raises(TypeError, match="^trials must be an int"):
        catalog.verify("softmax_free_energy", trials=True)
    assert catalog.verify("local_self_attention", n_tokens=2) < 1e-10
    assert catalog.verify("softmax_free_energy", trials=np.int64(1), n_tokens=np.int64(3), dim=np.int64(2)) < 1e-10
    with pytest.raises(ValueError, match="^dim must be an int >= 1"):
        fe.sample_sphere_tokens(3, 0)
    with pytest.raises(ValueError, match="^dim must be an int >= 1"):
        descent.multihead_sphere_instance(3, 0, 1)


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
    x, params = sample(name)
    with pytest.raises(TypeError, match=r"has dtype torch.float64, which differs from \w+ \(torch.float32\)"):
        getattr(catalog.FORMS[name], part)(x.float(), **params)


def test_every_form_with_parameters_is_covered():
    assert len(_forms_with_tensor_params()) >= 19  # the issue counted 19 catalog forms
