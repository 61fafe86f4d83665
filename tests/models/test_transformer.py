"""The pre-LN decoder with pluggable attention (energylab.models.transformer)."""
import math

import pytest
import torch

from energylab.layers import MHA2nd1st, MultiHeadAttention
from energylab.models import count_parameters
from energylab.models.transformer import Transformer, TransformerConfig, attention_parameters, sinusoidal_positions

V, D, HEADS, N, B = 13, 20, 4, 11, 3  # distinct sizes: a transposition cannot pass


def make(attention, **kw):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=V, dim=D, heads=HEADS, layers=3, max_len=17, **kw)
    return Transformer(cfg, attention)


@pytest.mark.parametrize("attention", [MultiHeadAttention, MHA2nd1st])
@pytest.mark.parametrize("tied", [False, True])
def test_shapes(attention, tied):
    model = make(attention, tied=tied)
    tokens = torch.randint(0, V, (B, N))
    assert model(tokens).shape == (B, N, V)


def test_parameter_counts():
    d, layers = D, 3
    mha, newton = make(MultiHeadAttention), make(MHA2nd1st)
    assert attention_parameters(mha) == [4 * d * d] * layers
    assert attention_parameters(newton) == [3 * d * d + 2 * HEADS] * layers  # W_Q, W_K, W_O and T_h, T'_h
    # everything else is identical: embedding V·d, readout V·d, per layer 2 LayerNorms (4d) and an FFN
    # (8d² + 5d), final LayerNorm 2d
    rest = 2 * V * d + layers * (4 * d + 8 * d * d + 5 * d) + 2 * d
    assert count_parameters(mha) == rest + layers * 4 * d * d
    assert count_parameters(newton) == rest + layers * (3 * d * d + 2 * HEADS)
    only = make(MHA2nd1st, ffn=False)
    assert count_parameters(only) == 2 * V * d + layers * (2 * d + 3 * d * d + 2 * HEADS) + 2 * d
    assert count_parameters(make(MultiHeadAttention, tied=True)) == count_parameters(mha) - V * d


@pytest.mark.parametrize("attention", [MultiHeadAttention, MHA2nd1st])
def test_causal_future_tokens_do_not_change_the_past(attention):
    model = make(attention).eval()
    tokens = torch.randint(0, V, (B, N))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 5) % V
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6, rtol=0)
    assert (a[:, 7:] - b[:, 7:]).abs().max() > 1e-3  # the changed positions do change


def test_dropout_only_in_training():
    model = make(MHA2nd1st, dropout=0.3)
    tokens = torch.randint(0, V, (B, N))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(tokens), model(tokens))
    model.train()
    with torch.no_grad():
        assert not torch.equal(model(tokens), model(tokens))


def test_sinusoidal_positions_values():
    pe = sinusoidal_positions(7, 6)
    assert pe.shape == (7, 6)
    assert pe[3, 0] == pytest.approx(math.sin(3.0), abs=1e-6)
    assert pe[3, 1] == pytest.approx(math.cos(3.0), abs=1e-6)
    assert pe[5, 4] == pytest.approx(math.sin(5.0 / 10000 ** (4 / 6)), abs=1e-6)
    assert sinusoidal_positions(4, 5).shape == (4, 5)  # odd widths work


def test_bad_input_raises():
    with pytest.raises(ValueError, match="heads"):
        TransformerConfig(vocab_size=V, dim=10, heads=4)
    with pytest.raises(ValueError, match="dropout"):
        TransformerConfig(vocab_size=V, dropout=1.0)
    with pytest.raises(ValueError, match="vocab_size"):
        TransformerConfig(vocab_size=0)
    model = make(MultiHeadAttention)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 18, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(1, 5))
    with pytest.raises(TypeError, match="attention"):
        Transformer(TransformerConfig(vocab_size=V), attention="MHA")
