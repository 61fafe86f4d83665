"""Bad input to the layers of energylab.layers (issues 13 and 35): dtype mismatch named, empty batches accepted,
zero tokens and non-positive sizes refused."""
import numpy as np
import pytest
import torch

from energylab import layers as M

F64 = torch.float64
DIM, HEADS = 6, 2

LAYERS = {
    "MultiHeadAttention": lambda: M.MultiHeadAttention(DIM, HEADS),
    "ExpressiveAttention": lambda: M.ExpressiveAttention(DIM, HEADS),
    "MHA2nd1st": lambda: M.MHA2nd1st(DIM, HEADS),
    "MHA2nd1stCorrected": lambda: M.MHA2nd1stCorrected(DIM, HEADS),
    "BiSoftmaxAttention": lambda: M.BiSoftmaxAttention(DIM, HEADS),
    "SigmoidAttention": lambda: M.SigmoidAttention(DIM, HEADS),
    "KernelLinearAttention": lambda: M.KernelLinearAttention(DIM, HEADS),
    "ReLUEnergyFeedforward": lambda: M.ReLUEnergyFeedforward(DIM),
    "SoftmaxEnergyFeedforward": lambda: M.SoftmaxEnergyFeedforward(DIM),
    "GatedEnergyFeedforward": lambda: M.GatedEnergyFeedforward(DIM),
}


def test_every_layer_is_probed():
    assert set(LAYERS) == {n for m in (M.free_energy, M.expressive, M.newton, M.hyperspherical) for n in m.__all__}


@pytest.mark.parametrize("name", LAYERS)
def test_a_float64_input_into_a_float32_layer_is_named(name):
    torch.manual_seed(0)
    layer = LAYERS[name]()
    x = torch.randn(2, 5, DIM, dtype=F64)
    with pytest.raises(TypeError, match=r"^x has dtype torch.float64, which differs from the layer's parameters "
                                        r"\(torch.float32\): they must match"):
        layer(x)
    assert layer.double()(x).dtype == F64  # converting one of them is the fix


@pytest.mark.parametrize("name", LAYERS)
def test_an_empty_batch_gives_an_empty_update(name):
    torch.manual_seed(0)
    layer = LAYERS[name]()
    x = torch.randn(3, 5, DIM)
    out = layer(x[:0])
    assert out.shape == (0, 5, DIM)
    assert torch.equal(layer(x)[:0], out)


def test_mixed_dtypes_are_allowed_under_autocast():
    """bf16 activations meet float32 weights by design under autocast: not an error there."""
    layer = M.ExpressiveAttention(DIM, HEADS)
    x = torch.randn(2, 5, DIM, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.isfinite(layer(x).float()).all()


ZERO_TOKEN_LAYERS = [lambda: M.MultiHeadAttention(4, 2), lambda: M.ExpressiveAttention(4, 2), lambda: M.MHA2nd1st(4, 2),
          lambda: M.BiSoftmaxAttention(4, 2), lambda: M.SigmoidAttention(4, 2), lambda: M.KernelLinearAttention(4, 2),
          lambda: M.ReLUEnergyFeedforward(4), lambda: M.SoftmaxEnergyFeedforward(4),
          lambda: M.GatedEnergyFeedforward(4)]


@pytest.mark.parametrize("make", ZERO_TOKEN_LAYERS)
def test_layers_refuse_zero_tokens(make):
    with pytest.raises(ValueError, match=r"^x must hold at least 1 token, got shape \(2, 0, 4\)"):
        make()(torch.zeros(2, 0, 4))


@pytest.mark.parametrize("cls", [M.MultiHeadAttention, M.ExpressiveAttention, M.MHA2nd1st, M.BiSoftmaxAttention,
                                 M.SigmoidAttention, M.KernelLinearAttention])
@pytest.mark.parametrize("dim", [0, -4])
def test_attention_layers_refuse_non_positive_dim(cls, dim):
    with pytest.raises(ValueError, match=f"^dim must be an int >= 1, got {dim}"):
        cls(dim, 2 if dim else 1)


@pytest.mark.parametrize("cls", [M.ReLUEnergyFeedforward, M.SoftmaxEnergyFeedforward, M.GatedEnergyFeedforward])
def test_feedforward_layers_refuse_bad_sizes_and_eps(cls):
    for dim in (0, -3):
        with pytest.raises(ValueError, match="^dim must be"):
            cls(dim, hidden=8)
    with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
        cls(4, eps=-1.0)
    assert cls(4, hidden=np.int64(6)).hidden == 6
