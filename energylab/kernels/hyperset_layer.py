"""The Hyper-SET layer's two fast paths (issue 27): its bi-softmax attention from one exponential and its ReLU
feedforward with the normalisation moved past the second product. Both are plain PyTorch ops with a backward pass
derived by hand (in the docstrings); rows "one-exp-bisoftmax" and "fused-relu-feedforward" of
:data:`energylab.kernels.FAST_PATHS`, checked by tests/layers/test_fast_paths.py against the catalog operators. Each
backward pass computes in the wider of the gradient's and the saved tensors' dtypes, so that bf16 activations saved
under autocast meet float32 gradients.

When they were written (a 2-core EPYC, one thread, both routes alternated in one process) one layer iteration,
forward and backward, cost 1.23x the Transformer block at the 6×6 league size (B = 64, N = 36, d = 64; the plain
route 1.53x). Outside pinned processes the layer now takes the C bi-softmax of :mod:`fused_attention` instead of
the first; ``python -m energylab.bench hyperset`` measures the iteration as a reader runs it
(``results/bench/hyperset-*.json``).
"""
from __future__ import annotations

import torch

from energylab._checks import check_count

__all__ = ["bisoftmax_one_exp", "relu_sphere_feedforward"]


class _BiSoftmaxOneExp(torch.autograd.Function):
    """Y = (A + Aᵀ) Z, A = softmax_row(β Z Zᵀ), whole (N, N) blocks and one exponential for both softmaxes.

    S = β Z Zᵀ is symmetric, so with E = exp(S − m) and row sums r = E 1 (r_i = Σ_j E_ij):
    A Z = (E Z) / r and Aᵀ Z = E (Z / r), i.e. Y = P₁ / r + P₂ with [P₁, P₂] = E [Z, U], U = Z / r: one exponential
    and one matrix product with 2 d_h columns. No max pass: by Cauchy–Schwarz every score is at most
    m = β max_i ‖z_i‖², and the diagonal S_ii = β‖z_i‖² ≥ 0 keeps every row sum ≥ exp(−m) (no underflow while m is
    below ~80; for RMS-normalised rows m = β d_h = √d_h). Saves E: O(B·H·N²) memory, as autograd would.

    Backward, G = ∂L/∂Y: ∂L/∂Z gets E (G/r) + (E G)/r through the values; ∂L/∂r_i = −(g_i·P₁_i + (E G)_i·z_i)/r_i²;
    ∂L/∂E_ij = (g_i/r_i)·z_j + g_i·u_j + ∂L/∂r_i, ∂L/∂S = E ⊙ ∂L/∂E, and S adds β (∂L/∂S + ∂L/∂Sᵀ) Z.
    """

    @staticmethod
    def forward(ctx, z, beta):
        dh = z.shape[-1]
        m = beta * z.pow(2).sum(-1).amax(-1)  # (BH,): the bound on every score
        ones = z.new_ones(z.shape[:-1] + (1,))
        # the shift rides in the product: [z, 1]·[β z, −m] = β z·z − m (no extra pass over the (N, N) scores)
        E = torch.bmm(torch.cat([z, ones], -1), torch.cat([beta * z, -m[:, None, None] * ones], -1).transpose(-1, -2))
        E = E.exp_()
        r = E.sum(-1, keepdim=True)
        u = z / r
        P = torch.bmm(E, torch.cat([z, u], -1))
        ctx.beta = beta
        ctx.save_for_backward(z, E, r, u, P[..., :dh])
        return P[..., :dh] / r + P[..., dh:]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        dtype = torch.promote_types(grad.dtype, ctx.saved_tensors[0].dtype)  # autocast may have saved bf16
        z, E, r, u, ez = (t.to(dtype) for t in ctx.saved_tensors)
        grad = grad.to(dtype)
        beta, dh = ctx.beta, z.shape[-1]
        gr = grad / r
        Q = torch.bmm(E, torch.cat([gr, grad], -1))  # [E G/r, E G]
        eg = Q[..., dh:]
        dr = ((grad * ez).sum(-1, keepdim=True) + (eg * z).sum(-1, keepdim=True)).div_(r * r).neg_()
        # ∂L/∂E = [G/r, G, ∂L/∂r] [Z, U, 1]ᵀ in one product, then ∂L/∂S = E ⊙ ∂L/∂E
        ds = torch.bmm(torch.cat([gr, grad, dr], -1), torch.cat([z, u, torch.ones_like(dr)], -1).transpose(-1, -2))
        ds.mul_(E)
        dz = Q[..., :dh] + eg / r
        dz.baddbmm_(ds, z, alpha=beta).baddbmm_(ds.transpose(-1, -2), z, alpha=beta)
        return dz.to(ctx.saved_tensors[0].dtype), None


def bisoftmax_one_exp(z, beta: float):
    """(A + Aᵀ) Z with A = softmax_row(β Z Zᵀ) from one exponential (Hyper-SET's loop at Sudoku and image sizes).
    z: (BH, N, d_h) with β max‖z_i‖² below ~80 (RMS-normalised rows: √d_h) -> (BH, N, d_h); N ≥ 1 (ValueError)."""
    check_count("z", z, -2, why="attention needs at least one key")  # the score bound is a max over the tokens
    return _BiSoftmaxOneExp.apply(z, beta)


class _ReluSphereFeedforward(torch.autograd.Function):
    """u = D ReLU(RMSNorm(Dᵀx)) = ρ ⊙ (ReLU(h) Dᵀ) with h = x D, ρ = (mean_m h_m² + ε)^(−1/2) per token: ReLU
    commutes with the positive ρ, so the normalisation moves past the second product onto the d-wide output.

    Backward, G = ∂L/∂u, p = ReLU(h) Dᵀ: ∂L/∂p = ρ G, ∂L/∂ρ = Σ_k g_k p_k, and ∂ρ/∂h = −ρ³ h / M, so
    ∂L/∂h = 1[h > 0] ⊙ (ρ G D) − (∂L/∂ρ) ρ³ h / M; then ∂L/∂x = (∂L/∂h) Dᵀ and ∂L/∂D = xᵀ ∂L/∂h + (ρ G)ᵀ ReLU(h).
    """

    @staticmethod
    def forward(ctx, x, D, eps):
        h = x @ D
        a = torch.relu(h)
        rho = torch.linalg.vector_norm(h, dim=-1, keepdim=True).pow_(2).div_(h.shape[-1]).add_(eps).rsqrt_()
        p = a @ D.T
        ctx.save_for_backward(x, D, h, a, p, rho)
        return p * rho

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x_in, D_in = ctx.saved_tensors[:2]
        dtype = torch.promote_types(grad.dtype, D_in.dtype)  # autocast may have saved bf16 activations
        x, D, h, a, p, rho = (t.to(dtype) for t in ctx.saved_tensors)
        grad = grad.to(dtype)
        d, M = D.shape
        gp = grad * rho
        drho = (grad * p).sum(-1, keepdim=True)
        dh = gp @ D
        # in place: a fresh (B, N, M) tensor cost more than the pass itself (one Hyper-SET iteration 3% faster)
        torch.ops.aten.threshold_backward.grad_input(dh, h, 0, grad_input=dh)
        dh.addcmul_(h, drho * rho.pow(3), value=-1 / M)
        dD = torch.addmm(x.reshape(-1, d).T @ dh.reshape(-1, M), gp.reshape(-1, d).T, a.reshape(-1, M))
        return (dh @ D.T).to(x_in.dtype), dD.to(D_in.dtype), None


def relu_sphere_feedforward(x, D, eps: float):
    """Hyper-SET's feedforward step D ReLU(RMSNorm(Dᵀx)) without gains, fused: x (…, d), D (d, M) -> (…, d)."""
    return _ReluSphereFeedforward.apply(x, D, eps)
