"""Hyper-SET's hyperspherical energies (paper 004): identities beyond operator = autograd, bad input."""
import math

import pytest
import torch

from energylab.forms import hyperspherical as hs
from energylab.forms import local as lo
from energylab.forms import sphere as fs
from tests.probes import F64, gen, rel


def test_hyperset_rms_operators_agree_on_the_constraint_set():
    g = gen(7)
    d, heads, n = 6, 2, 5
    p = d // heads
    W = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=F64))[0]
    u = torch.randn(n, heads, p, generator=g, dtype=F64)
    z = math.sqrt(p) * u / u.norm(dim=-1, keepdim=True)  # ‖W_hᵀ x_i‖ = √p
    X = z.flatten(-2) @ W.T
    W = W.T.reshape(heads, p, d)  # (H, d_h, d): W_h = the former column block W_hᵀ
    for fn in (hs.hyperset_attention_update, hs.sigmoid_attention_update, hs.kernel_linear_attention_update):
        assert rel(fn(X, W, 0.5, rms=True), fn(X, W, 0.5)) < 1e-13
    D = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=F64))[0]
    Xd = math.sqrt(d) * torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=F64), dim=-1) @ D.T
    for fn in (hs.hyperset_feedforward_update, hs.softmax_feedforward_update, hs.gated_feedforward_update):
        assert rel(fn(Xd, D, rms=True), fn(Xd, D)) < 1e-13


def test_hyperset_bad_input():
    X = torch.randn(5, 6, dtype=F64)
    with pytest.raises(ValueError, match="W"):
        hs.hyperset_attention_update(X, torch.eye(6, dtype=F64), 0.5)  # (d, d), not (H, d_h, d)
    with pytest.raises(ValueError, match="W"):
        hs.sigmoid_attention_update(X, torch.eye(5, dtype=F64).reshape(1, 5, 5), 0.5)
    with pytest.raises(ValueError, match="beta"):
        hs.kernel_linear_attention_update(X, torch.eye(6, dtype=F64).reshape(2, 3, 6), 0.0)
    with pytest.raises(ValueError, match="D"):
        hs.gated_feedforward_update(X, torch.eye(5, dtype=F64))
    with pytest.raises(ValueError, match="A"):
        fs.symmetric_attention_energy(X, torch.randn(6, 6, dtype=F64), 1.0)
    with pytest.raises(ValueError, match="J"):
        lo.local_attention_update(X, torch.zeros(5, 5, 6, 5, dtype=F64), 1.0)
