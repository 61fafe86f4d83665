"""Bad input to Hyper-SET (issue 47, last item): the layer's, the step sizes' and the classifier's arguments, the
states and patches fed to them, and the iteration counts, each refused naming the argument and what is accepted."""
from __future__ import annotations

import pytest
import torch

from energylab.layers.hyperset import HyperSETLayer, StepSizes, sinusoidal_embedding
from energylab.models.hyperset import HyperSET

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("kwargs, error, expected", [
    ({"step": NAN}, ValueError, r"^step must be a finite number > 0, got nan"),
    ({"step": INF}, ValueError, r"^step must be a finite number > 0, got inf"),
    ({"step": -0.1}, ValueError, r"^step must be a finite number > 0, got -0.1"),
    ({"step": 0.0}, ValueError, r"^step must be a finite number > 0, got 0.0"),
    ({"eps": NAN}, ValueError, r"^eps must be a finite number >= 0, got nan"),
    ({"eps": -1e-6}, ValueError, r"^eps must be a finite number >= 0"),
    ({"ffn_mult": 0}, ValueError, r"^ffn_mult must be an int >= 1, got 0"),
    ({"ffn_mult": 1.5}, TypeError, r"^ffn_mult must be an int, got 1.5"),
    ({"dim": 0}, ValueError, r"^dim must be an int >= 1, got 0"),
    ({"dim": 8.0}, TypeError, r"^dim must be an int, got 8.0"),
    ({"lora_rank": 1.5}, TypeError, r"^lora_rank must be an int, got 1.5"),
    ({"lora_rank": -1}, ValueError, r"^lora_rank must be an int >= 0, got -1"),
    ({"lora_iterations": 0}, ValueError, r"^lora_iterations must be an int >= 1, got 0"),
    ({"time_dim": 0}, ValueError, r"^time_dim must be an int >= 2, got 0"),
    ({"time_dim": 3}, ValueError, r"^time_dim must be an even int >= 2 \(cos and sin of width/2 frequencies\)"),
    ({"gains": 1}, TypeError, r"^gains must be True or False, got 1"),
    ({"inject": "yes"}, TypeError, r"^inject must be True or False"),
    ({"zero_init_all": None}, TypeError, r"^zero_init_all must be True or False"),
])
def test_layer_arguments_are_checked(kwargs, error, expected):
    """Before: a NaN, infinite or negative step or eps, ffn_mult = 0 and time_dim = 0 built a layer silently (NaN
    states, or no hidden units); the others raised raw torch errors (ZeroDivisionError, 'argument size')."""
    args = {"dim": 8, "heads": 2, **kwargs}
    with pytest.raises(error, match=expected):
        HyperSETLayer(**args)


def test_valid_layer_arguments_still_build_the_same_layer():
    torch.manual_seed(0)
    a = HyperSETLayer(8, 2, step=0.5, eps=0)
    assert a.step == 0.5 and a.eps == 0.0
    assert HyperSETLayer(8, 2).steps.time_dim == 8 and HyperSETLayer(7, 7).steps.time_dim == 8
    assert HyperSETLayer(8, 2, time_dim=6).steps.time_dim == 6


def test_states_and_iterations_given_to_the_layer_are_checked():
    layer = HyperSETLayer(8, 2)
    with pytest.raises(ValueError, match=r"^x must have shape \(B, N, d=8\), got \(3, 8\)"):
        layer(torch.randn(3, 8))
    with pytest.raises(ValueError, match=r"^x must have shape \(B, N, d=8\), got \(1, 3, 7\)"):
        layer(torch.randn(1, 3, 7))
    with pytest.raises(TypeError, match=r"^x must be a floating-point torch.Tensor of states \(B, N, d\), got "
                                        r"torch.int64"):
        layer(torch.ones(1, 3, 8, dtype=torch.long))
    for t in (0, -1):
        with pytest.raises(ValueError, match=rf"^t must be an int >= 1, got {t}"):
            layer(torch.randn(1, 3, 8), t=t)
    with pytest.raises(TypeError, match=r"^t must be an int, got 1.5"):
        layer(torch.randn(1, 3, 8), t=1.5)
    with pytest.raises(ValueError, match=r"^x must have shape \(B, N, d=8\)"):
        layer.metrics(torch.randn(3, 8))


def test_step_sizes_and_the_time_embedding_are_checked():
    with pytest.raises(ValueError, match=r"^dim must be an int >= 1, got 0"):
        StepSizes(0)
    with pytest.raises(ValueError, match=r"^t must be a finite iteration number, got nan"):
        StepSizes(4)(NAN, torch.randn(1, 2, 4))
    for width, expected in ((0, r"^width must be an int >= 2, got 0"), (3, r"^width must be an even int >= 2")):
        with pytest.raises(ValueError, match=expected):
            sinusoidal_embedding(torch.tensor(1.0), width)
    with pytest.raises(ValueError, match=r"^t contains NaN or inf"):
        sinusoidal_embedding(torch.tensor([1.0, INF]), 4)
    with pytest.raises(TypeError, match=r"^t must be a real torch.Tensor of positions"):
        sinusoidal_embedding(1.0, 4)
    # valid input: unchanged
    t = torch.arange(3.0)
    assert torch.equal(sinusoidal_embedding(t, 4)[:, 0], t.double().cos())  # ω_0 = 1


@pytest.mark.parametrize("name", ["patch_dim", "n_patches", "classes", "dim", "iterations"])
def test_classifier_sizes_are_checked(name):
    """Before: 0 classes, patches or patch dims built a classifier silently; iterations=0 blamed lora_iterations."""
    args = {"patch_dim": 4, "n_patches": 3, "classes": 2, "dim": 8, "heads": 2, name: 0}
    with pytest.raises(ValueError, match=rf"^{name} must be an int >= 1, got 0"):
        HyperSET(**args)


def test_classifier_patches_and_iterations_are_checked():
    """Before: iterations=0 ran the training T (0 is falsy), -1 gave UnboundLocalError, a wrong number of patches a
    raw broadcasting error."""
    torch.manual_seed(0)
    model = HyperSET(4, 3, 2, dim=8, heads=2)
    x = torch.randn(2, 3, 4)
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"^iterations must be an int >= 1, got {bad}"):
            model(x, iterations=bad)
        with pytest.raises(ValueError, match=rf"^iterations must be an int >= 1, got {bad}"):
            model.trace(x, bad, lambda t, s: t)
    with pytest.raises(ValueError, match=r"^patches must have shape \(B, N=3, p=4\), got \(2, 5, 4\)"):
        model(torch.randn(2, 5, 4))
    with pytest.raises(TypeError, match=r"^patches must be a floating-point torch.Tensor"):
        model(torch.ones(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^unknown layer 7"):
        HyperSET(4, 3, 2, layer=7)
    assert model(x).shape == (2, 2) and torch.equal(model(x, iterations=model.iterations), model(x))
