"""Bad input to the public helpers of the Hyper-SET and recurrent experiments (issue 47, last item): patch sizes and
images, and the scales of the Jacobian and perturbation probes, each refused naming the argument."""
from __future__ import annotations

import pytest
import torch

from energylab.experiments import hyperset as hx
from energylab.experiments import recurrent as rx
from energylab.models.looped import LoopedConfig, LoopedModel


def test_patches_checks_the_images_and_the_patch_size():
    """Before: a patch not dividing the image dropped the border silently; patch 0 raised a raw unfold error."""
    images = torch.randn(2, 1, 8, 8)
    with pytest.raises(ValueError, match=r"^patch=3 must divide the image height and width, got images of shape "
                                         r"\(2, 1, 8, 8\)"):
        hx.patches(images, 3)
    with pytest.raises(ValueError, match=r"^patch must be an int >= 1, got 0"):
        hx.patches(images, 0)
    with pytest.raises(ValueError, match=r"^images must have 4 dims, got shape \(1, 8, 8\)"):
        hx.patches(images[0], 2)
    with pytest.raises(ValueError, match=r"^images contains NaN or inf"):
        hx.patches(torch.full((1, 1, 4, 4), float("nan")), 2)
    assert hx.patches(images, 2).shape == (2, 16, 4)


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -1.0, 0.0])
def test_jacobian_norms_refuse_a_bad_scale(scale):
    """Before: scale=nan returned NaN norms (and a negative scale the norms of other tokens) without a word."""
    with pytest.raises(ValueError, match=r"^scale must be a finite number > 0, got "):
        rx.jacobian_norms([2], dim=4, heads=2, scale=scale)


def test_jacobian_norms_refuse_zero_tokens():
    with pytest.raises(ValueError, match=r"^tokens\[\] must be an int >= 1, got 0"):
        rx.jacobian_norms([0], dim=4, heads=2)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_perturbed_refuses_a_non_finite_scale(scale):
    """Before: perturbed(model, 'value', nan) returned a model with NaN weights without a word."""
    model = LoopedModel(LoopedConfig(size=4, dim=8, heads=2, layer="itrsa", iterations=2))
    with pytest.raises(ValueError, match=r"^scale must be a finite number in \(-inf, inf\), got "):
        rx.perturbed(model, "value", scale)
    assert torch.equal(rx.perturbed(model, "value", 2.0).layer.msa.v.weight, 2 * model.layer.msa.v.weight)
