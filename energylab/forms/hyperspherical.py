"""Hyper-SET's energies on hyperspheres and the operators they induce (paper 004, Sec. 4 and App. G.1).

Tokens are rows of X (..., N, d). Attention energies live in H subspaces z_iʰ = W_h x_i, with the multi-head
weights W (H, d_h, d) of book/notation.md; feedforward energies use a dictionary D (d, M). The paper constrains
‖z_iʰ‖ = √d_h and ‖Dᵀx_i‖ = √M; the energies here omit the constraint (so autograd checks the plain gradient), and
every operator takes ``rms=True`` to evaluate the same formula at the RMS-normalised projections — the paper's
layer (eqs. 9 and 11), which normalises but does not differentiate through the normalisation. The layers of
:mod:`energylab.layers` call these operators.
Paper symbols: their X is d × N (tokens as columns) and their W_h is d × d_h; our W_h is their W_hᵀ (d_h × d),
so their z_iʰ = W_hᵀx_i is our W_h x_i and their W_h Zʰ A is our (A Zʰ) W_h.
"""
from __future__ import annotations

import math

import torch

from energylab._checks import (
    check_count,
    check_dim,
    check_nonzero_rows,
    check_positive,
    check_same_dtype,
    check_tensor,
)
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import heads_for, merge_heads, randn, row_blocks, split_heads

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "08_hyperset"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Hyper-SET and its alternative energies"

__all__ = [
    "head_projections",
    "rms_normalize",
    "hyperset_attention_energy",
    "sigmoid_attention_energy",
    "kernel_linear_attention_energy",
    "hyperset_feedforward_energy",
    "softmax_feedforward_energy",
    "gated_feedforward_energy",
    "hyperset_attention_update",
    "sigmoid_attention_update",
    "kernel_linear_attention_update",
    "hyperset_feedforward_update",
    "softmax_feedforward_update",
    "gated_feedforward_update",
]


def rms_normalize(u: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """RMSNorm without gain, u / √(mean(u²) + ε) over the last dim: the projection onto the sphere of radius √d_h.

    eps ≥ 0; with eps = 0 a zero row has no direction to keep (ValueError naming u).
    """
    check_tensor("u", u)
    eps = _check_rms(u, eps, "u")
    return _rms_normalize(u, eps)


def _rms_normalize(u: torch.Tensor, eps: float) -> torch.Tensor:
    return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)


def _check_rms(u: torch.Tensor, eps, name: str) -> float:
    """eps ≥ 0, and with eps = 0 no zero row of u (whose RMS normalisation would be 0/0)."""
    eps = check_positive("eps", eps, allow_zero=True, scalar=True)
    if eps == 0:
        check_nonzero_rows(name, u, why="with eps = 0 its RMS normalisation is 0/0 (pass eps > 0)")
    return eps


# ----------------------------------------------------------------------------- energies
def head_projections(X: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """z_iʰ = W_h x_i for every head h (paper 004, eq. 2; their W_hᵀ x_i).

    X: (..., N ≥ 1, d), W: (H, d_h, d)  ->  Z: (..., H, N, d_h).
    """
    check_tensor("X", X)
    check_tensor("W", W, ndim=3)
    if X.dim() < 2:
        raise ValueError(f"X must have at least 2 dims (..., N, d), got shape {tuple(X.shape)}")
    check_count("X", X, -2, why="attention needs at least one key")
    check_count("W", W, 0, what="head", why="a multi-head form needs H ≥ 1 heads")
    check_dim("W", W.shape[-1], X.shape[-1])
    check_same_dtype(("X", X), ("W", W))
    return split_heads(X @ W.flatten(0, 1).T, W.shape[0])  # (..., N, H·d_h) -> (..., H, N, d_h)


def hyperset_attention_energy(X: torch.Tensor, W: torch.Tensor, beta) -> torch.Tensor:
    """E_ATTN = β⁻¹ Σ_h Σ_i log Σ_j exp(β z_iʰᵀ z_jʰ) (paper 004, eqs. 3-4, constraint omitted). -> (...)."""
    beta = check_positive("beta", beta)
    Z = head_projections(X, W)
    scores = beta * Z @ Z.transpose(-1, -2)  # (..., H, N, N): β z_iᵀ z_j
    return torch.logsumexp(scores, dim=-1).sum((-1, -2)) / beta


def sigmoid_attention_energy(X: torch.Tensor, W: torch.Tensor, beta) -> torch.Tensor:
    """E = ½ β⁻¹ Σ_h Σ_ij σ(β z_iʰᵀ z_jʰ) (paper 004, Table 18, f(x) = x/(2β), K = σ(β xᵀy)). -> (...)."""
    beta = check_positive("beta", beta)
    Z = head_projections(X, W)
    return torch.sigmoid(beta * Z @ Z.transpose(-1, -2)).sum((-1, -2, -3)) / (2 * beta)


def kernel_linear_attention_energy(X: torch.Tensor, W: torch.Tensor, beta) -> torch.Tensor:
    """E = (β/4) Σ_h Σ_ij (Φ(z_iʰ)ᵀ Φ(z_jʰ))², Φ = σ element-wise (paper 004, Table 18, linear attention). -> (...)."""
    beta = check_positive("beta", beta)
    phi = torch.sigmoid(head_projections(X, W))  # (..., H, N, d_h)
    return 0.25 * beta * (phi @ phi.transpose(-1, -2)).pow(2).sum((-1, -2, -3))


def _check_ff(X, D) -> None:
    check_tensor("X", X)
    check_tensor("D", D, ndim=2)
    check_dim("D", D.shape[0], X.shape[-1], what="first dimension")
    check_same_dtype(("X", X), ("D", D))


def hyperset_feedforward_energy(X: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """E_FF = −½ Σ_i Σ_m ReLU(d_mᵀ x_i)² (paper 004, eq. 5, constraint omitted). X: (..., N, d), D: (d, M) -> (...)."""
    _check_ff(X, D)
    return -0.5 * torch.relu(X @ D).pow(2).sum((-1, -2))


def softmax_feedforward_energy(X: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """E = −Σ_i log Σ_m exp(d_mᵀ x_i) (paper 004, Table 19, softmax FF). -> (...)."""
    _check_ff(X, D)
    return -torch.logsumexp(X @ D, dim=-1).sum(-1)


def gated_feedforward_energy(X: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """E = −½ Σ_i (Σ_m Φ(d_mᵀ x_i))², Φ = σ (paper 004, Table 19, gated FF). -> (...)."""
    _check_ff(X, D)
    return -0.5 * torch.sigmoid(X @ D).sum(-1).pow(2).sum(-1)


# ----------------------------------------------------------------------------- operators (−∇E)
def _projections(X, W, rms, eps):
    """The checked projections Z (..., H, N, d_h), RMS-normalised when ``rms``."""
    Z = head_projections(X, W)
    if not rms:
        return Z
    eps = _check_rms(Z, eps, "X")  # names X: a zero projection W_h x_i comes from it
    return _rms_normalize(Z, eps)


def _to_tokens(Y: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Σ_h y_iʰ W_h: Y (..., H, N, d_h), W (H, d_h, d)  ->  (..., N, d)."""
    return merge_heads(Y) @ W.flatten(0, 1)  # (..., N, H·d_h) @ (H·d_h, d)


def hyperset_attention_update(X, W, beta, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E_ATTN = −Σ_h W_h Zʰ (softmax_col + softmax_row)(β Zʰᵀ Zʰ) — symmetric bi-softmax attention (eq. 7).

    In rows: −Σ_h [(A + Aᵀ) Zʰ] W_h with A = softmax_row(β Zʰ Zʰᵀ); one W plays query, key and value.
    X: (..., N, d), W: (H, d_h, d)  ->  (..., N, d). The Hyper-SET layer (eq. 9) is X + α_t · update.
    """
    beta = check_positive("beta", beta)
    Z = _projections(X, W, rms, eps)
    Z_t = Z.transpose(-1, -2)
    rows_out, cols_out = [], 0
    for rows in row_blocks(Z.shape[-2], Z.shape[-2], Z[..., 0, 0].numel()):  # cache-sized blocks of rows i
        A = torch.softmax(beta * Z[..., rows, :] @ Z_t, dim=-1)  # (..., H, n, N): rows of softmax_row
        rows_out.append(A @ Z)  # Σ_j A_ij z_j for i in the block
        cols_out = cols_out + A.transpose(-1, -2) @ Z[..., rows, :]  # Σ_i A_ik z_i, summed over blocks
    return -_to_tokens(torch.cat(rows_out, dim=-2) + cols_out, W)


def sigmoid_attention_update(X, W, beta, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E = −Σ_h [σ'(β Zʰ Zʰᵀ) Zʰ] W_h, σ' = σ(1 − σ) (paper 004, Table 18, sigmoid attention). -> (..., N, d)."""
    beta = check_positive("beta", beta)
    Z = _projections(X, W, rms, eps)
    Z_t = Z.transpose(-1, -2)
    out = []
    for rows in row_blocks(Z.shape[-2], Z.shape[-2], Z[..., 0, 0].numel()):  # cache-sized blocks of rows
        s = torch.sigmoid(beta * Z[..., rows, :] @ Z_t)  # (..., H, n, N)
        out.append((s * (1 - s)) @ Z)
    return -_to_tokens(torch.cat(out, dim=-2), W)


def kernel_linear_attention_update(X, W, beta, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E = −Σ_h [Φ'(Zʰ) ⊙ β Φ(Zʰ) (Φ(Zʰ)ᵀΦ(Zʰ))] W_h, Φ = σ (paper 004, Table 18, linear attention).

    The d_h × d_h matrix Φᵀ Φ = Σ_j φ_j φ_jᵀ is formed first, so the cost is O(N d_h²): linear in N.
    """
    beta = check_positive("beta", beta)
    Z = _projections(X, W, rms, eps)
    phi = torch.sigmoid(Z)
    gram = phi.transpose(-1, -2) @ phi  # (..., H, d_h, d_h): Σ_j φ_j φ_jᵀ
    return -_to_tokens(phi * (1 - phi) * (beta * phi @ gram), W)


def _ff_hidden(X, D, rms, eps):
    """The checked hidden activations Dᵀx_i (..., N, M), RMS-normalised when ``rms``."""
    _check_ff(X, D)
    U = X @ D  # (..., N, M): d_mᵀ x_i
    if not rms:
        return U
    eps = _check_rms(U, eps, "X")
    return _rms_normalize(U, eps)


def hyperset_feedforward_update(X, D, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E_FF = D ReLU(Dᵀ x_i) per token (paper 004, eq. 10; with rms=True eq. 11). X: (..., N, d) -> (..., N, d)."""
    return torch.relu(_ff_hidden(X, D, rms, eps)) @ D.T


def softmax_feedforward_update(X, D, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E = D softmax(Dᵀ x_i) per token (paper 004, Table 19, softmax FF). -> (..., N, d)."""
    return torch.softmax(_ff_hidden(X, D, rms, eps), dim=-1) @ D.T


def gated_feedforward_update(X, D, rms: bool = False, eps: float = 0.0) -> torch.Tensor:
    """−∇E = D [(Σ_m Φ(d_mᵀx_i)) · Φ'(Dᵀx_i)] per token, Φ = σ (paper 004, Table 19, gated FF). -> (..., N, d)."""
    s = torch.sigmoid(_ff_hidden(X, D, rms, eps))
    return (s.sum(-1, keepdim=True) * s * (1 - s)) @ D.T


# ----------------------------------------------------------------------------- samplers
def _sample_hyperset(n_tokens, dim, generator=None, dtype=torch.float64):
    """X (N, d), {"W": (H, d_h, d) with H = heads_for(dim), "beta": 1/√d_h}."""
    heads = heads_for(dim)
    W = randn(generator, dtype, dim, dim) / math.sqrt(dim)
    X = randn(generator, dtype, n_tokens, dim)
    return X, {"W": W.T.reshape(heads, dim // heads, dim), "beta": 1 / math.sqrt(dim // heads)}


def _sample_ff(n_tokens, dim, generator=None, dtype=torch.float64):
    """X (N, d), {"D": (d, 2d + 1)}."""
    D = randn(generator, dtype, dim, 2 * dim + 1) / math.sqrt(dim)
    return randn(generator, dtype, n_tokens, dim), {"D": D}


# ----------------------------------------------------------------------------- the catalog
_HYPERSET_NOTE = "Exact gradient of the unconstrained energy; the layer evaluates it at RMS-normalised projections."
register(AttentionForm(
    chapter=CHAPTER,
    name="hyperset_attention", multi_head=True, paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E_{ATTN} = \beta^{-1}\sum_h\sum_i\log\sum_j e^{\beta z_i^{h\top} z_j^h}",
                      r"-\sum_h W_h Z^h(\mathrm{softmax}_{col} + \mathrm{softmax}_{row})(\beta Z^{h\top}Z^h)"),
    energy=hyperset_attention_energy, update=hyperset_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    chapter=CHAPTER,
    name="sigmoid_attention", multi_head=True, paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = \tfrac{1}{2\beta}\sum_h\sum_{ij}\sigma(\beta z_i^{h\top} z_j^h)",
                      r"-\sum_h W_h Z^h\,\sigma'(\beta Z^{h\top}Z^h)"),
    energy=sigmoid_attention_energy, update=sigmoid_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    chapter=CHAPTER,
    name="kernel_linear_attention", multi_head=True, paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = \tfrac{\beta}{4}\sum_h\sum_{ij}(\Phi(z_i^h)^\top\Phi(z_j^h))^2",
                      r"-\sum_h W_h\,\Phi'(Z^h)\odot\beta\,\Phi(Z^h)\Phi(Z^h)^\top\Phi(Z^h)"),
    energy=kernel_linear_attention_energy, update=kernel_linear_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE + " Φ = sigmoid; cost linear in N.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="hyperset_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E_{FF} = -\tfrac12\sum_i\sum_m \mathrm{ReLU}(d_m^\top x_i)^2",
                      r"D\,\mathrm{ReLU}(D^\top x_i)"),
    energy=hyperset_feedforward_energy, update=hyperset_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    chapter=CHAPTER,
    name="softmax_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = -\sum_i\log\sum_m e^{d_m^\top x_i}", r"D\,\mathrm{softmax}(D^\top x_i)"),
    energy=softmax_feedforward_energy, update=softmax_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    chapter=CHAPTER,
    name="gated_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = -\tfrac12\sum_i\Big(\sum_m\Phi(d_m^\top x_i)\Big)^2",
                      r"D\Big[\Big(\sum_m\Phi(d_m^\top x_i)\Big)\Phi'(D^\top x_i)\Big]"),
    energy=gated_feedforward_energy, update=gated_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE + " Φ = sigmoid.",
))
