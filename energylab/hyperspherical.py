"""Hyper-SET's energies on hyperspheres and the operators they induce (paper 004, Sec. 4 and App. G.1).

Tokens are rows of X (..., N, d). Attention energies live in H subspaces z_iʰ = W_hᵀ x_i, W = [W_1..W_H]
(d, H·p); feedforward energies use a dictionary D (d, M). The paper constrains ‖z_iʰ‖ = √p and
‖Dᵀx_i‖ = √M; the energies here omit the constraint (so autograd checks the plain gradient), and every
operator takes ``rms=True`` to evaluate the same formula at the RMS-normalised projections — the paper's layer
(eqs. 9 and 11), which normalises but does not differentiate through the normalisation. ``validate=False``
skips the input checks (layers validate their input once, and data-dependent checks break torch.compile).
Paper symbols: their X is d × N (tokens as columns); ours is N × d, so their W_h Z A is our (A Z) W_hᵀ.
"""
from __future__ import annotations

import torch

from energylab._checks import check_count, check_dim, check_divides, check_nonzero_rows, check_positive, check_tensor
from energylab.kernels import row_blocks

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
    """RMSNorm without gain, u / √(mean(u²) + ε) over the last dim: the projection onto the sphere of radius √p.

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


# ----------------------------------------------------------------------------- Hyper-SET (paper 004)
def head_projections(X: torch.Tensor, W: torch.Tensor, heads: int) -> torch.Tensor:
    """z_iʰ = W_hᵀ x_i with W = [W_1, ..., W_H] split by columns (paper 004, eq. 2).

    X: (..., N, d), W: (d, H·p)  ->  Z: (..., H, N, p).
    """
    check_tensor("X", X)
    check_tensor("W", W, ndim=2)
    if X.dim() < 2:
        raise ValueError(f"X must have at least 2 dims (..., N, d), got shape {tuple(X.shape)}")
    check_count("X", X, -2, why="attention needs at least one key")
    check_dim("W", W.shape[0], X.shape[-1], what="first dimension")
    heads = check_divides("heads", heads, W.shape[1])
    Z = X @ W  # (..., N, H·p)
    return Z.unflatten(-1, (heads, W.shape[1] // heads)).transpose(-2, -3)  # (..., H, N, p)


def hyperset_attention_energy(X: torch.Tensor, W: torch.Tensor, heads: int, beta) -> torch.Tensor:
    """E_ATTN = β⁻¹ Σ_h Σ_i log Σ_j exp(β z_iʰᵀ z_jʰ) (paper 004, eqs. 3-4, constraint omitted). -> (...)."""
    beta = check_positive("beta", beta)
    Z = head_projections(X, W, heads)
    scores = beta * Z @ Z.transpose(-1, -2)  # (..., H, N, N): β z_iᵀ z_j
    return torch.logsumexp(scores, dim=-1).sum((-1, -2)) / beta


def sigmoid_attention_energy(X: torch.Tensor, W: torch.Tensor, heads: int, beta) -> torch.Tensor:
    """E = ½ β⁻¹ Σ_h Σ_ij σ(β z_iʰᵀ z_jʰ) (paper 004, Table 18, f(x) = x/(2β), K = σ(β xᵀy)). -> (...)."""
    beta = check_positive("beta", beta)
    Z = head_projections(X, W, heads)
    return torch.sigmoid(beta * Z @ Z.transpose(-1, -2)).sum((-1, -2, -3)) / (2 * beta)


def kernel_linear_attention_energy(X: torch.Tensor, W: torch.Tensor, heads: int, beta) -> torch.Tensor:
    """E = (β/4) Σ_h Σ_ij (Φ(z_iʰ)ᵀ Φ(z_jʰ))², Φ = σ element-wise (paper 004, Table 18, linear attention). -> (...)."""
    beta = check_positive("beta", beta)
    phi = torch.sigmoid(head_projections(X, W, heads))  # (..., H, N, p)
    return 0.25 * beta * (phi @ phi.transpose(-1, -2)).pow(2).sum((-1, -2, -3))


def _check_ff(X, D) -> None:
    check_tensor("X", X)
    check_tensor("D", D, ndim=2)
    check_dim("D", D.shape[0], X.shape[-1], what="first dimension")


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
def _merge_heads(Y: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Σ_h y_iʰ W_hᵀ: Y (..., H, N, p), W (d, H·p)  ->  (..., N, d)."""
    return Y.transpose(-2, -3).flatten(-2) @ W.T  # (..., N, H·p) @ (H·p, d)


def _projections(X, W, heads, rms, eps, validate=True):
    if validate:
        Z = head_projections(X, W, heads)
        if rms:
            eps = _check_rms(Z, eps, "X")  # names X: a zero projection W_hᵀx_i comes from it
    else:  # (..., N, H·p) -> (..., H, N, p)
        Z = (X @ W).unflatten(-1, (heads, W.shape[1] // heads)).transpose(-2, -3)
    return _rms_normalize(Z, eps) if rms else Z


def hyperset_attention_update(X, W, heads: int, beta, rms: bool = False, eps: float = 0.0,
                              validate: bool = True) -> torch.Tensor:
    """−∇E_ATTN = −Σ_h W_h Zʰ (softmax_col + softmax_row)(β Zʰᵀ Zʰ) — symmetric bi-softmax attention (eq. 7).

    In rows: −Σ_h [(A + Aᵀ) Zʰ] W_hᵀ with A = softmax_row(β Zʰ Zʰᵀ); one W plays query, key and value.
    X: (..., N, d)  ->  (..., N, d). The Hyper-SET layer (eq. 9) is X + α_t · update.
    """
    if validate:
        beta = check_positive("beta", beta)
    Z = _projections(X, W, heads, rms, eps, validate)
    Z_t = Z.transpose(-1, -2)
    rows_out, cols_out = [], 0
    for rows in row_blocks(Z.shape[-2], Z.shape[-2], Z[..., 0, 0].numel()):  # cache-sized blocks of rows i
        A = torch.softmax(beta * Z[..., rows, :] @ Z_t, dim=-1)  # (..., H, n, N): rows of softmax_row
        rows_out.append(A @ Z)  # Σ_j A_ij z_j for i in the block
        cols_out = cols_out + A.transpose(-1, -2) @ Z[..., rows, :]  # Σ_i A_ik z_i, summed over blocks
    return -_merge_heads(torch.cat(rows_out, dim=-2) + cols_out, W)


def sigmoid_attention_update(X, W, heads: int, beta, rms: bool = False, eps: float = 0.0,
                             validate: bool = True) -> torch.Tensor:
    """−∇E = −Σ_h [σ'(β Zʰ Zʰᵀ) Zʰ] W_hᵀ, σ' = σ(1 − σ) (paper 004, Table 18, sigmoid attention). -> (..., N, d)."""
    if validate:
        beta = check_positive("beta", beta)
    Z = _projections(X, W, heads, rms, eps, validate)
    Z_t = Z.transpose(-1, -2)
    out = []
    for rows in row_blocks(Z.shape[-2], Z.shape[-2], Z[..., 0, 0].numel()):  # cache-sized blocks of rows
        s = torch.sigmoid(beta * Z[..., rows, :] @ Z_t)  # (..., H, n, N)
        out.append((s * (1 - s)) @ Z)
    return -_merge_heads(torch.cat(out, dim=-2), W)


def kernel_linear_attention_update(X, W, heads: int, beta, rms: bool = False, eps: float = 0.0,
                                   validate: bool = True) -> torch.Tensor:
    """−∇E = −Σ_h [Φ'(Zʰ) ⊙ β Φ(Zʰ) (Φ(Zʰ)ᵀΦ(Zʰ))] W_hᵀ, Φ = σ (paper 004, Table 18, linear attention).

    The p × p matrix Φᵀ Φ = Σ_j φ_j φ_jᵀ is formed first, so the cost is O(N p²): linear in N.
    """
    if validate:
        beta = check_positive("beta", beta)
    Z = _projections(X, W, heads, rms, eps, validate)
    phi = torch.sigmoid(Z)
    gram = phi.transpose(-1, -2) @ phi  # (..., H, p, p): Σ_j φ_j φ_jᵀ
    return -_merge_heads(phi * (1 - phi) * (beta * phi @ gram), W)


def _ff_hidden(X, D, rms, eps, validate=True):
    if validate:
        _check_ff(X, D)
    U = X @ D  # (..., N, M): d_mᵀ x_i
    if validate and rms:
        eps = _check_rms(U, eps, "X")
    return _rms_normalize(U, eps) if rms else U


def hyperset_feedforward_update(X, D, rms: bool = False, eps: float = 0.0, validate: bool = True) -> torch.Tensor:
    """−∇E_FF = D ReLU(Dᵀ x_i) per token (paper 004, eq. 10; with rms=True eq. 11). X: (..., N, d) -> (..., N, d)."""
    return torch.relu(_ff_hidden(X, D, rms, eps, validate)) @ D.T


def softmax_feedforward_update(X, D, rms: bool = False, eps: float = 0.0, validate: bool = True) -> torch.Tensor:
    """−∇E = D softmax(Dᵀ x_i) per token (paper 004, Table 19, softmax FF). -> (..., N, d)."""
    return torch.softmax(_ff_hidden(X, D, rms, eps, validate), dim=-1) @ D.T


def gated_feedforward_update(X, D, rms: bool = False, eps: float = 0.0, validate: bool = True) -> torch.Tensor:
    """−∇E = D [(Σ_m Φ(d_mᵀx_i)) · Φ'(Dᵀx_i)] per token, Φ = σ (paper 004, Table 19, gated FF). -> (..., N, d)."""
    s = torch.sigmoid(_ff_hidden(X, D, rms, eps, validate))
    return (s.sum(-1, keepdim=True) * s * (1 - s)) @ D.T
