"""Bad input to the attractor models (issue 47, last item): the bare network's config, the spins and states given to
it, the sites it trains on, the Hebbian couplings of no samples and the backprop baselines' sizes and inputs, each
refused naming the argument."""
from __future__ import annotations

import pytest
import torch

from energylab.models.attractor import (
    AttractorConfig,
    BareSelfAttention,
    PatchViT,
    RecurrentBlock,
    correlation_couplings,
)

SMALL = {"n_tokens": 4, "patch_pixels": 2, "dim": 4}


@pytest.mark.parametrize("kwargs, error, expected", [
    ({"dim": 9.0}, TypeError, r"^dim must be an int, got 9.0"),
    ({"dim": 1}, ValueError, r"^dim must be an int >= 2, got 1"),
    ({"patch_pixels": 0}, ValueError, r"^patch_pixels must be an int >= 1, got 0"),
    ({"drop_masked": 1}, TypeError, r"^drop_masked must be True or False, got 1"),
])
def test_bare_config_is_checked(kwargs, error, expected):
    """Before: drop_masked=1 built silently; the sizes blamed 'inputs' of the embedding."""
    with pytest.raises(error, match=expected):
        BareSelfAttention(AttractorConfig(**{**SMALL, **kwargs}))


def test_bare_config_must_be_a_config():
    with pytest.raises(TypeError, match=r"^config must be an AttractorConfig, got dict"):
        BareSelfAttention({"dim": 8})


def test_bare_spins_states_and_sites_are_checked():
    """Before: spins with the wrong number of tokens were embedded silently; de_embed passed NaN through and gave
    raw einsum errors; float sites raised a raw IndexError."""
    model = BareSelfAttention(AttractorConfig(**SMALL), torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"^spins must have shape \(B, N, 2a\) = \(B, 4, 4\), got \(2, 5, 4\)"):
        model.embed(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match=r"^x must have shape \(B, N, d\) = \(B, 4, 4\), got \(2, 4, 3\)"):
        model.de_embed(torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match=r"^x contains NaN or inf"):
        model.de_embed(torch.full((2, 4, 4), float("nan")))
    spins = torch.randn(2, 4, 4)
    with pytest.raises(TypeError, match=r"^sites must be an integer tensor of token indices, got torch.float32"):
        model(spins, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"^sites must have shape \(2,\) \(one token index per image\), got \(3,\)"):
        model(spins, torch.tensor([0, 1, 2]))
    e = model(spins)
    assert torch.equal(model(spins, torch.tensor([1, 3])), e[[0, 1], [1, 3]])


def test_hebbian_couplings_of_no_samples_are_refused():
    """Before: a mean over B = 0 samples, all NaN, without a word."""
    with pytest.raises(ValueError, match=r"^x must hold at least 1 sample, got shape \(0, 4, 4\) "
                                         r"\(a mean over no samples is NaN\)"):
        correlation_couplings(torch.randn(0, 4, 4))


@pytest.mark.parametrize("build, error, expected", [
    (lambda: RecurrentBlock(0, 2), ValueError, r"^n_tokens must be an int >= 1, got 0"),
    (lambda: RecurrentBlock(4, 0), ValueError, r"^patch_pixels must be an int >= 1, got 0"),
    (lambda: RecurrentBlock(4, 2, width=0), ValueError, r"^width must be an int >= 1, got 0"),
    (lambda: RecurrentBlock(4, 2, heads=3), ValueError, r"^heads=3 must divide the dimension 32"),
    (lambda: PatchViT(4, 2, mlp=0), ValueError, r"^mlp must be an int >= 1, got 0"),
    (lambda: PatchViT(4, 2, heads=0), ValueError, r"^heads must be an int >= 1, got 0"),
])
def test_baseline_sizes_are_checked(build, error, expected):
    """Before: 0 tokens or pixels built silently; heads not dividing the width raised a bare AssertionError."""
    with pytest.raises(error, match=expected):
        build()


def test_baseline_spins_are_checked():
    torch.manual_seed(0)
    block = RecurrentBlock(4, 2, width=8, heads=2, mlp=8)
    with pytest.raises(ValueError, match=r"^spins must have shape \(B, N, 2a\) = \(B, 4, 4\), got \(1, 4, 3\)"):
        block(torch.randn(1, 4, 3), 1)
    with pytest.raises(ValueError, match=r"^spins must have shape \(B, N, 2a\) = \(B, 4, 4\), got \(1, 5, 4\)"):
        PatchViT(4, 2, width=8, heads=2, mlp=8, layers=1)(torch.randn(1, 5, 4))
