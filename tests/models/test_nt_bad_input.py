"""Bad input to the NT-task model (issue 47, last item): its config's sizes and flags, and the shapes given to the
loss and the accuracy, each refused naming the argument and the accepted values."""
from __future__ import annotations

import pytest
import torch

from energylab.models.nt import NTModel, NTModelConfig, accuracy, squared_error


@pytest.mark.parametrize("kwargs, error, expected", [
    ({"N": 2.5}, TypeError, r"^config.N must be an int, got 2.5"),
    ({"N": 1}, ValueError, r"^config.N must be an int >= 2, got 1"),
    ({"n_con": 0}, ValueError, r"^config.n_con must be an int >= 1, got 0"),
    ({"ffn_mult": 1.5}, TypeError, r"^config.ffn_mult must be an int, got 1.5"),
    ({"per_position": "no"}, TypeError, r"^config.per_position must be True or False, got 'no'"),
    ({"affine": 1}, TypeError, r"^config.affine must be True or False, got 1"),
])
def test_config_sizes_and_flags_are_checked(kwargs, error, expected):
    """Before: fractional sizes raised torch's 'argument size' errors; per_position='no' (a true string) and
    affine=1 built a model silently."""
    with pytest.raises(error, match=expected):
        NTModel(NTModelConfig(**{"N": 4, "n_con": 5, **kwargs}))


def test_config_must_be_an_nt_config():
    with pytest.raises(TypeError, match=r"^config must be a NTModelConfig, got dict"):
        NTModel({"N": 4})


def test_loss_and_accuracy_check_their_shapes():
    """Before: B = 0 gave a NaN loss and accuracy silently; mismatched batches a raw broadcasting error."""
    out, y = torch.randn(2, 4), torch.tensor([0, 3])
    for f in (squared_error, accuracy):
        with pytest.raises(ValueError, match=r"^out must have shape \(B, d\) and targets \(B,\) with B >= 1, got "
                                             r"\(0, 4\) and \(0,\)"):
            f(out[:0], y[:0])
        with pytest.raises(ValueError, match=r"got \(2, 4\) and \(3,\)"):
            f(out, torch.zeros(3, dtype=torch.long))
        with pytest.raises(TypeError, match=r"^targets must be an integer torch.Tensor of symbols \(B,\), got "
                                            r"torch.float32"):
            f(out, y.float())
        with pytest.raises(TypeError, match=r"^out must be a floating-point torch.Tensor of scores"):
            f(out.long(), y)
    assert float(accuracy(torch.eye(4)[[0, 3]], y)) == 1.0 and float(squared_error(torch.eye(4)[[0, 3]], y)) == 0.0
