"""Bad input to the looped Sudoku model, its ItrSA / AKOrN / Hyper-SET layers, the NT-task model and the attractor
network (issue 47, remaining part): tokens and symbols out of range, iteration counts, shapes and flags, each refused
naming the argument and the accepted values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from energylab.layers import recurrent as R
from energylab.layers.hyperset import HyperSETLayer
from energylab.models.attractor import AttractorConfig, BareSelfAttention, RecurrentBlock
from energylab.models.hyperset import HyperSET
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.models.nt import NTModel, NTModelConfig


def _looped(layer):
    torch.manual_seed(0)
    return LoopedModel(LoopedConfig(size=4, dim=8, heads=2, layer=layer, iterations=2))


@pytest.mark.parametrize("layer", ["transformer", "hyperset", "itrsa", "akorn"])
@pytest.mark.parametrize("bad, shown", [(5, "0..5"), (-1, "-1..0")])
def test_looped_tokens_out_of_range_are_refused(layer, bad, shown):
    """Before: a Sudoku token > size or < 0 was a raw IndexError of the embedding (a device-side assert on a GPU)."""
    model = _looped(layer)
    tokens = torch.zeros(2, 16, dtype=torch.long)
    tokens[1, 3] = bad
    with pytest.raises(ValueError, match=rf"^tokens must lie in 0\.\.4 \(0 = blank, 1\.\.4 the digits\), got values "
                                         rf"{shown}"):
        model(tokens)
    assert model(tokens.clamp(0, 4)).shape == (2, 16, 4)


def test_looped_iteration_counts_and_flags_are_checked():
    """Before: iterations=True ran one iteration, a NumPy int was refused, readouts(at=[1.5]) read out at t = 1,
    at=[nan] was a raw conversion error and return_states='no' (a true string) returned the states."""
    model = _looped("itrsa")
    tokens = torch.zeros(1, 16, dtype=torch.long)
    with pytest.raises(TypeError, match=r"^iterations must be an int, got True"):
        model(tokens, iterations=True)
    assert model(tokens, iterations=np.int64(2)).shape == (1, 16, 4)
    with pytest.raises(TypeError, match=r"^at\[\] must be an int, got 1.5"):
        model.readouts(tokens, [1.5])
    with pytest.raises(TypeError, match=r"^at\[\] must be an int, got nan"):
        model.readouts(tokens, [float("nan")])
    with pytest.raises(ValueError, match=r"^at\[\] must be an int >= 1, got 0"):
        model.readouts(tokens, [0, 2])
    with pytest.raises(ValueError, match=r"^at must hold at least one iteration count"):
        model.readouts(tokens, [])
    with pytest.raises(TypeError, match=r"^return_states must be True or False, got 'no'"):
        model(tokens, return_states="no")
    with pytest.raises(TypeError, match=r"^config.iterations must be an int, got True"):
        LoopedModel(LoopedConfig(size=4, dim=8, heads=2, iterations=True))


@pytest.mark.parametrize("build", [lambda: R.MSA(8, 2), lambda: R.ItrSA(8, 2), lambda: R.KuramotoLayer(8, 2)])
def test_recurrent_layers_check_the_tokens_and_the_input(build):
    """Before: a wrong width or a 1-dim x was a raw matmul or unpacking error, c of another shape a raw broadcasting
    error."""
    torch.manual_seed(0)
    layer = build()
    with pytest.raises(ValueError, match=r"^x must have shape \(\.\.\., N, d=8\), got \(8,\)"):
        layer(torch.randn(8))
    if not isinstance(layer, R.KuramotoLayer):  # (its oscillator check answers first, naming x)
        with pytest.raises(ValueError, match=r"^x must have shape \(\.\.\., N, d=8\), got \(2, 5, 6\)"):
            layer(torch.randn(2, 5, 6))
        return
    with pytest.raises(ValueError, match=r"^c must have the tokens' shape \(2, 5, 8\) \(or broadcast to it\), got "
                                         r"\(2, 4, 8\)"):
        layer(torch.randn(2, 5, 8), torch.randn(2, 4, 8))
    assert layer(torch.randn(2, 5, 8), torch.randn(2, 5, 8)).shape == (2, 5, 8)


def test_itrsa_checks_its_input_c():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=r"^c must have the tokens' shape \(2, 5, 8\)"):
        R.ItrSA(8, 2)(torch.randn(2, 5, 8), torch.randn(2, 4, 8))


def test_norm_readout_checks_the_width():
    with pytest.raises(ValueError, match=r"^x must be a floating-point tensor \(\.\.\., d=8\), got \(2, 6\)"):
        R.NormReadout(8, 3, 4)(torch.randn(2, 6))


def test_hyperset_layer_checks_the_iteration_and_x0():
    """Before: weights(t=1.5) of a LoRA layer was a raw IndexError, metrics(x, 0) or t=-3 read as t = 1, and an x0 of
    another shape a raw broadcasting error."""
    torch.manual_seed(0)
    layer, x = HyperSETLayer(8, 2, lora_rank=2), torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match=r"^t must be an int, got 1.5"):
        layer.weights(1.5)
    for t in (0, -3):
        with pytest.raises(ValueError, match=rf"^t must be an int >= 1, got {t}"):
            layer.metrics(x, t)
    with pytest.raises(ValueError, match=r"^x0 must be a tensor of the states' shape \(2, 5, 8\), got \(2, 4, 8\)"):
        layer(x, x0=torch.randn(2, 4, 8))
    assert layer(x, t=1, x0=x).shape == x.shape


def test_hyperset_classifier_refuses_non_finite_patches():
    """Before: NaN patches gave NaN logits (and an argmax of 0) without a word."""
    torch.manual_seed(0)
    model = HyperSET(4, 4, 3, dim=8, heads=2, ffn_mult=1, iterations=2)
    with pytest.raises(ValueError, match=r"^patches contains NaN or inf"):
        model(torch.full((1, 4, 4), float("nan")))
    assert torch.isfinite(model(torch.randn(1, 4, 4))).all()


@pytest.mark.parametrize("bad", [4, -1])
def test_nt_symbols_out_of_range_are_refused(bad):
    """Before: a symbol outside 0..N-1 became an all-zero one-hot row and the model answered without a word."""
    torch.manual_seed(0)
    model = NTModel(NTModelConfig(N=4, n_con=5))
    symbols = torch.zeros(2, 5, dtype=torch.long)
    symbols[0, 2] = bad
    with pytest.raises(ValueError, match=r"^symbols must lie in 0\.\.3 \(the basis N=4\), got values "):
        model(symbols)
    with pytest.raises(TypeError, match=r"^symbols must be an integer torch.Tensor \(B, N_con=5\), got list"):
        model([[0] * 5])
    with pytest.raises(TypeError, match=r"^return_attention must be True or False, got 'no'"):
        model(symbols.clamp(0, 3), return_attention="no")


@pytest.mark.parametrize("bad", [9, -1])
def test_attractor_sites_out_of_range_are_refused(bad):
    """Before: site 9 of 4 tokens was a raw IndexError, site -1 picked the last token without a word."""
    torch.manual_seed(0)
    model = BareSelfAttention(AttractorConfig(n_tokens=4, patch_pixels=1, dim=2))
    with pytest.raises(ValueError, match=r"^sites must lie in 0\.\.3 \(token indices\), got values "):
        model(torch.randn(2, 4, 2), torch.tensor([bad, 0]))
    assert model(torch.randn(2, 4, 2), torch.tensor([3, 0])).shape == (2,)


def test_attractor_field_without_masked_checks_lambda():
    """Before: with drop_masked=True a NaN lambda gave a field of zeros (NaN weights set to 0) without a word."""
    torch.manual_seed(0)
    model = BareSelfAttention(AttractorConfig(n_tokens=4, patch_pixels=1, dim=2, drop_masked=True))
    x = torch.nn.functional.normalize(torch.randn(2, 4, 2), dim=-1)
    with pytest.raises(ValueError, match=r"^lam must be a finite number > 0, got nan"):
        model.field(x, float("nan"))
    with pytest.raises(ValueError, match=r"^x contains NaN or inf"):
        model.field(torch.full_like(x, float("nan")))


def test_recurrent_block_checks_tau():
    """Before: tau=True ran one repetition and a NumPy int was refused as 'not a positive int'."""
    torch.manual_seed(0)
    block, spins = RecurrentBlock(4, 1, 8, 2, 8), torch.randn(2, 4, 2)
    with pytest.raises(TypeError, match=r"^tau must be an int, got True"):
        block(spins, True)
    with pytest.raises(ValueError, match=r"^tau must be an int >= 1, got 0"):
        block(spins, 0)
    assert block(spins, np.int64(2)).shape == (2, 4, 1)
