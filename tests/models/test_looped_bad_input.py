"""Bad input to the looped Sudoku model that builds the Hyper-SET, ItrSA and AKOrN layers (issue 47, last item): the
config's sizes and flags and the tokens' dtype, each refused naming the argument."""
from __future__ import annotations

import pytest
import torch

from energylab.models.looped import LoopedConfig, LoopedModel


@pytest.mark.parametrize("kwargs, error, expected", [
    ({"size": 0}, ValueError, r"^config.size must be an int >= 2, got 0"),
    ({"size": 4.0}, TypeError, r"^config.size must be an int, got 4.0"),
    ({"ffn_mult": 0, "layer": "hyperset"}, ValueError, r"^config.ffn_mult must be an int >= 1, got 0"),
    ({"heads": 0, "layer": "itrsa"}, ValueError, r"^config.heads must be an int >= 1, got 0"),
    ({"inject": "no"}, TypeError, r"^config.inject must be True or False, got 'no'"),
])
def test_config_sizes_and_flags_are_checked(kwargs, error, expected):
    """Before: size 0, a Hyper-SET with ffn_mult 0 and inject='no' (a true string) built silently."""
    with pytest.raises(error, match=expected):
        LoopedModel(LoopedConfig(**{"size": 4, "dim": 8, "heads": 2, **kwargs}))


def test_config_must_be_a_looped_config():
    with pytest.raises(TypeError, match=r"^config must be a LoopedConfig, got dict"):
        LoopedModel({"size": 4})


@pytest.mark.parametrize("layer", ["hyperset", "itrsa", "akorn"])
def test_tokens_must_be_integer_digits(layer):
    torch.manual_seed(0)
    model = LoopedModel(LoopedConfig(size=4, dim=8, heads=2, layer=layer, iterations=2))
    with pytest.raises(TypeError, match=r"^tokens must be an int64 \(or int32\) tensor of digits 0..4 \(0 = blank\), "
                                        r"got torch.float32"):
        model(torch.zeros(1, 16))
    assert model(torch.zeros(1, 16, dtype=torch.long)).shape == (1, 16, 4)
