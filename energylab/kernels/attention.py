"""Tiled attention kernels with a hand-written backward that recomputes the scores (issue 19).

The layers of :mod:`energylab.layers` whose weights are not a softmax of q·k (expressive, bi-softmax, sigmoid,
Newton) cannot use ``F.scaled_dot_product_attention``. These kernels do what a fused attention kernel does, with
PyTorch ops: they loop over tiles (a few (batch·head) slices × a few query rows × all keys), sized so that one
score tile stays in a core's L2 cache, and they save only O(B·H·N·d_h) tensors for the backward pass, which
recomputes each score tile instead of keeping it (memory like SDPA's; without this, autograd keeps every (N, N)
score tensor). The backward passes are derived by hand in the docstrings; tests/layers/test_fast_attention.py checks
them against autograd through the catalog operators in float64.

On CUDA, expressive attention instead goes through ``torch.nn.attention.flex_attention`` (compiled) with the score
modification log(s²/(1+s²)) (paper 001's weights are a softmax of it). On CPU flex attention is no help (PyTorch
2.13): it has no backward on CPU, and its compiled forward took 2.8-3.1× SDPA's forward for EA (1.9-2.2× even
for plain softmax) at B = 8, H = 8, d_h = 32, N = 256 and 1024 on this machine.

The kernels take flattened (batch·heads, N, d_h) tensors and do not validate (the layers made their inputs).
Under torch.func transforms (vmap of an ensemble) the layers use their composite autograd route instead: a
custom ``autograd.Function`` written this way does not vmap.
"""
from __future__ import annotations

import functools

import torch

from energylab import kernels
from energylab.kernels import fused_attention

__all__ = ["tiles", "expressive_heads", "expressive_attention", "bisoftmax_attention", "sigmoid_attention",
           "newton_direction", "flex_expressive_attention", "flex_or_none"]

TILE = 2**18  # elements of one score tile (1 MiB of float32: a few buffers fit the 2 MiB L2), timed on 2-core EPYC
MIN_ROWS = 16  # the fewest query rows per tile (fewer make the matrix products inefficient)


def tiles(batch: int, n_rows: int, n_cols: int) -> list[tuple[slice, slice]]:
    """(batch slice, row slice) pairs covering a (batch, n_rows, n_cols) score tensor in tiles of about TILE."""
    rows = max(MIN_ROWS, min(n_rows, TILE // max(1, n_cols)))
    per = max(1, TILE // (rows * n_cols))
    return [(slice(b, min(b + per, batch)), slice(r, min(r + rows, n_rows)))
            for b in range(0, batch, per) for r in range(0, n_rows, rows)]


def _zeros_t(x: torch.Tensor) -> torch.Tensor:
    """Zeros of x's shape with the last two dimensions swapped: a key-side sum accumulated transposed, Σ (xᵀ tile),
    because a product whose first factor is a transposed score tile ran 1.5× slower on one CPU thread."""
    return x.new_zeros(x.shape[:-2] + x.shape[-1:] + x.shape[-2:-1])


def _masked(s: torch.Tensor, mask, rows: slice, value: float) -> torch.Tensor:
    return s if mask is None else s.masked_fill_(~mask[rows], value)


# ----------------------------------------------------------------------------- expressive attention
class _Expressive(torch.autograd.Function):
    """y_m = Σ_k w_mk v_k / Σ_k w_mk, w = s²/(1+s²), s = c q kᵀ (scale c; paper 001). Saves q, k, v, y, row sums N_m.

    Backward, with r = 1/(1+s²), w = s² r, dw/ds = 2 s r² and g_m = ∂L/∂y_m / N_m:
    ∂L/∂v_k = Σ_m w_mk g_m, ∂L/∂s_mk = 2 s r² (g_m·v_k − g_m·y_m), then ∂L/∂q = c (∂L/∂s) k, ∂L/∂k = c (∂L/∂s)ᵀ q.
    A masked score is set to 0: its weight and its gradient factor are then exactly 0. A row whose scores are all 0
    returns zeros (as :func:`energylab.forms.expressive.expressive_weights`) and passes no gradient back.

    Speed (one CPU thread, timed per tile): the key-side gradients are accumulated transposed, (∂L/∂v)ᵀ += gᵀ w,
    because a product whose first factor is a transposed tile (wᵀ g) ran 1.5× slower; and the row sums are a
    separate sum, because a product with d_h + 1 = 33 columns ran 1.3× slower than with 32.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, scale):
        out = q.new_empty(q.shape[:-1] + v.shape[-1:])
        norm = q.new_empty(q.shape[:-1] + (1,))
        one, work = q.new_ones(()), _Workspace(q, 2)
        for b, rows in tiles(q.shape[0], q.shape[1], k.shape[1]):
            s, d = work.scores(q[b, rows], k[b], scale)
            _masked(s, mask, rows, 0.0)
            torch.addcmul(one, s, s, out=d)  # 1 + s²
            w = s.square_().div_(d)
            torch.matmul(w, v[b], out=out[b, rows])  # Σ_k w_mk v_k (out=: no temporary and copy)
            torch.sum(w, -1, keepdim=True, out=norm[b, rows])  # N_m
        norm.clamp_min_(torch.finfo(out.dtype).tiny)  # a row of zero scores returns zeros
        y = out.div_(norm)
        ctx.scale = scale
        ctx.save_for_backward(q, k, v, norm, y, mask)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        q, k, v, norm, y, mask = ctx.saved_tensors
        scale = ctx.scale
        g = (grad_y / norm).masked_fill_(norm <= torch.finfo(norm.dtype).tiny, 0.0)  # zero rows: zero gradient
        g2, gy = 2 * g, -2 * (g * y).sum(-1, keepdim=True)  # ∂L/∂w = 2 g vᵀ − 2 g·y: one product, gy broadcast
        grad_q = torch.empty_like(q)
        grad_k_t, grad_v_t = _zeros_t(k), _zeros_t(v)  # (BH, d_h, N): accumulated transposed
        one, work = q.new_ones(()), _Workspace(q, 3)
        for b, rows in tiles(q.shape[0], q.shape[1], k.shape[1]):
            qb, kb = q[b, rows], k[b]
            s, r, u = work.scores(qb, kb, scale)
            _masked(s, mask, rows, 0.0)
            torch.addcmul(one, s, s, out=r).reciprocal_()  # r = 1/(1+s²)
            torch.mul(s, r, out=u)  # s r
            grad_v_t[b].baddbmm_(g[b, rows].transpose(-1, -2), s.mul_(u))  # gᵀ w, w = s·(s r)
            grad_s = torch.baddbmm(gy[b, rows], g2[b, rows], v[b].transpose(-1, -2), out=s).mul_(u.mul_(r))  # · s r²
            torch.baddbmm(grad_q[b, rows], grad_s, kb, beta=0, alpha=scale, out=grad_q[b, rows])
            grad_k_t[b].baddbmm_(qb.transpose(-1, -2), grad_s, alpha=scale)
        return grad_q, grad_k_t.transpose(-1, -2), grad_v_t.transpose(-1, -2), None, None


class _Workspace:
    """Score-tile buffers reused across tiles: a fresh 2 MiB tensor per tile costs page faults on every call."""

    def __init__(self, like: torch.Tensor, count: int):
        self.like, self.count, self.buffers = like, count, None

    def scores(self, qb: torch.Tensor, kb: torch.Tensor, scale: float = 1.0) -> list[torch.Tensor]:
        """[scale · qb kbᵀ, then count − 1 free buffers], all of the tile's shape (views of the first tile's buffers).

        The scale multiplies inside the product (free: no pass over the tile)."""
        shape = qb.shape[:-1] + kb.shape[-2:-1]
        numel = shape.numel()
        if self.buffers is None:
            self.buffers = [self.like.new_empty(numel) for _ in range(self.count)]
        views = [buf[:numel].view(shape) for buf in self.buffers]
        torch.baddbmm(views[0], qb, kb.transpose(-1, -2), beta=0, alpha=scale, out=views[0])  # scale: free
        return views


def expressive_attention(q, k, v, mask=None, scale: float = 1.0):
    """EA's Σ_k a_mk v_k, a = expressive_weights(scale · q kᵀ, mask) (paper 001), tiled, O(B·H·N) saved memory.

    q: (BH, M, d_h), k: (BH, N, d_h), v: (BH, N, e), mask: None or boolean (M, N) (True = allowed) -> (BH, M, e).
    The scale multiplies inside the matrix products (no pass over q or the scores). Dtypes: those of fast path
    ``"tiled-expressive"`` (bfloat16, float32, float64); any other raises ValueError (float16 would return NaN
    where a score exceeds 256: the kernel forms s² without the reference path's clamp).
    """
    accepted = kernels.FAST_PATHS["tiled-expressive"].dtypes
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in accepted:
            raise ValueError(f"{name} has dtype {t.dtype}, which the tiled expressive kernel does not take; accepted "
                             f"dtypes: {', '.join(str(d) for d in accepted)}")
    return _Expressive.apply(q, k, v, mask, scale)


# ----------------------------------------------------------------------------- Hyper-SET's symmetric forms
class _BiSoftmax(torch.autograd.Function):
    """Y = (A + Aᵀ) Z, A = softmax_row(β Z Zᵀ) (paper 004, eq. 7 without −W_h). Saves Z and A Z.

    Backward, with G = ∂L/∂Y: the value paths give A G + Aᵀ G; ∂L/∂A = G Zᵀ + Z Gᵀ, and the softmax gives
    ∂L/∂S = A ⊙ (∂L/∂A − δ), δ_i = Σ_k A_ik (∂L/∂A)_ik = g_i·(A Z)_i + z_i·(A G)_i; then S = β Z Zᵀ adds
    β (∂L/∂S + ∂L/∂Sᵀ) Z. Each tile holds whole rows of A, so no pass needs the log-normalisers.
    """

    @staticmethod
    def forward(ctx, z, beta):
        rows_out, cols_out_t = torch.empty_like(z), _zeros_t(z)
        work = _Workspace(z, 1)
        for b, rows in tiles(z.shape[0], z.shape[1], z.shape[1]):
            (s,) = work.scores(z[b, rows], z[b], beta)
            a = torch.softmax(s, dim=-1)
            torch.matmul(a, z[b], out=rows_out[b, rows])  # Σ_j A_ij z_j
            cols_out_t[b].baddbmm_(z[b, rows].transpose(-1, -2), a)  # (Σ_i A_ik z_i)ᵀ
        ctx.beta = beta
        ctx.save_for_backward(z, rows_out)
        return rows_out + cols_out_t.transpose(-1, -2)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        z, az = ctx.saved_tensors
        beta = ctx.beta
        gz, zg = torch.cat([grad, z], -1), torch.cat([z, grad], -1)  # [G, Z] [Z, G]ᵀ = G Zᵀ + Z Gᵀ
        dz, dz_t = torch.empty_like(z), _zeros_t(z)  # the row-side and the column-side (transposed) sums
        work = _Workspace(z, 2)
        for b, rows in tiles(z.shape[0], z.shape[1], z.shape[1]):
            zb, gb = z[b, rows], grad[b, rows]
            s, da = work.scores(zb, z[b], beta)
            a = torch.softmax(s, dim=-1)
            ag = a @ grad[b]  # (A G) rows
            dz_t[b].baddbmm_(gb.transpose(-1, -2), a)  # (Aᵀ G)ᵀ
            delta = (gb * az[b, rows]).sum(-1, keepdim=True) + (zb * ag).sum(-1, keepdim=True)
            ds = torch.matmul(gz[b, rows], zg[b].transpose(-1, -2), out=da).sub_(delta).mul_(a)
            torch.baddbmm(ag, ds, z[b], alpha=beta, out=dz[b, rows])  # A G + β ∂L/∂S Z
            dz_t[b].baddbmm_(zb.transpose(-1, -2), ds, alpha=beta)
        return dz.add_(dz_t.transpose(-1, -2)), None


def bisoftmax_attention(z, beta: float):
    """(A + Aᵀ) Z with A = softmax_row(β Z Zᵀ), tiled, O(B·H·N) saved memory. z: (BH, N, d_h) -> (BH, N, d_h)."""
    return _BiSoftmax.apply(z, beta)


class _Sigmoid(torch.autograd.Function):
    """Y = σ'(β Z Zᵀ) Z, σ' = σ(1 − σ) (paper 004, Table 18, without −W_h). Saves Z only.

    Backward, F = σ'(S) symmetric, G = ∂L/∂Y: the value path gives Fᵀ G = F G; ∂L/∂S = σ''(S) ⊙ (G Zᵀ) with
    σ'' = σ(1 − σ)(1 − 2σ), and S = β Z Zᵀ adds β (∂L/∂S + ∂L/∂Sᵀ) Z.
    """

    @staticmethod
    def forward(ctx, z, beta):
        y = torch.empty_like(z)
        work = _Workspace(z, 2)
        for b, rows in tiles(z.shape[0], z.shape[1], z.shape[1]):
            s, f = work.scores(z[b, rows], z[b], beta)
            sig = s.sigmoid_()
            y[b, rows] = torch.addcmul(sig, sig, sig, value=-1.0, out=f) @ z[b]  # σ' = σ − σ²
        ctx.beta = beta
        ctx.save_for_backward(z)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        beta = ctx.beta
        dz, dz_t = torch.empty_like(z), _zeros_t(z)  # the row-side and the column-side (transposed) sums
        work = _Workspace(z, 3)
        for b, rows in tiles(z.shape[0], z.shape[1], z.shape[1]):
            zb, gb = z[b, rows], grad[b, rows]
            s, f, gs = work.scores(zb, z[b], beta)
            sig = s.sigmoid_()
            torch.addcmul(sig, sig, sig, value=-1.0, out=f)  # σ'(S) = σ − σ²
            fg = f @ grad[b]  # F G (F symmetric)
            ds = torch.matmul(gb, z[b].transpose(-1, -2), out=gs).mul_(f).mul_(sig.mul_(-2).add_(1))  # ⊙ σ''
            torch.baddbmm(fg, ds, z[b], alpha=beta, out=dz[b, rows])
            dz_t[b].baddbmm_(zb.transpose(-1, -2), ds, alpha=beta)
        return dz.add_(dz_t.transpose(-1, -2)), None


def sigmoid_attention(z, beta: float):
    """σ'(β Z Zᵀ) Z, tiled, saving only Z. z: (BH, N, d_h) -> (BH, N, d_h)."""
    return _Sigmoid.apply(z, beta)


# ----------------------------------------------------------------------------- MHA2nd1st's Newton direction
def _times(x, M, transpose: bool = False):
    """x M (or x Mᵀ) per (batch·head); M None stands for the identity."""
    return x if M is None else x @ (M.transpose(-1, -2) if transpose else M)


class _Newton(torch.autograd.Function):
    """out = g + (s₀/T') G⁻¹ with p = softmax(q kᵀ/T), k̄ = p K, g = q − k̄, u = g G, c = u Kᵀ, r = p ⊙ c,
    s₀ = r K − k̄ (k̄·u) (paper 000, eqs. 29-31, as :func:`energylab.forms.newton.newton_first_order_direction`).

    Saves q, k, k̄ and s₁ = s₀/T'. Backward (e = ∂L/∂s₀, o = ∂L/∂out): ∂L/∂r = e Kᵀ, ∂L/∂c = p ⊙ ∂L/∂r,
    ∂L/∂u = (∂L/∂c) K − k̄ (e·k̄), ∂L/∂g = o + (∂L/∂u) Gᵀ, ∂L/∂k̄ = −e (k̄·u) − u (e·k̄) − ∂L/∂g,
    ∂L/∂p = c ⊙ ∂L/∂r + (∂L/∂k̄) Kᵀ, ∂L/∂ℓ = p ⊙ (∂L/∂p − δ) with δ = Σ_j p_j ∂L/∂p_j = e·(s₀ + k̄ (k̄·u)) + ∂L/∂k̄·k̄,
    ∂L/∂K = rᵀe + (∂L/∂c)ᵀu + pᵀ ∂L/∂k̄ + (∂L/∂ℓ)ᵀq/T, ∂L/∂q = ∂L/∂g + (∂L/∂ℓ) K/T, ∂L/∂T = −Σ q·(∂L/∂ℓ)K / T².
    """

    @staticmethod
    def forward(ctx, q, k, T, T2, G, G_inv, mask):
        out, k_bar, s1 = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)
        work = _Workspace(q, 2)
        for b, rows in tiles(q.shape[0], q.shape[1], k.shape[1]):
            qb, kb = q[b, rows], k[b]
            logits, c = work.scores(qb, kb)
            p = torch.softmax(_masked(logits.div_(T[b]), mask, rows, float("-inf")), dim=-1)
            kbar = p @ kb
            g = qb - kbar
            u = _times(g, None if G is None else G[b])
            r = torch.matmul(u, kb.transpose(-1, -2), out=c).mul_(p)  # p ⊙ (u Kᵀ)
            s = (r @ kb).sub_(kbar * (kbar * u).sum(-1, keepdim=True)).div_(T2[b])
            k_bar[b, rows], s1[b, rows] = kbar, s
            out[b, rows] = g + _times(s, None if G_inv is None else G_inv[b])
        ctx.save_for_backward(q, k, T, T2, G, G_inv, mask, k_bar, s1)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, T, T2, G, G_inv, mask, k_bar, s1 = ctx.saved_tensors
        dq, dk_t, dT, dT2 = torch.empty_like(q), _zeros_t(k), torch.zeros_like(T), torch.zeros_like(T2)
        dG = None if G is None else torch.zeros_like(G)
        dG_inv = None if G_inv is None else torch.zeros_like(G_inv)
        work = _Workspace(q, 4)
        for b, rows in tiles(q.shape[0], q.shape[1], k.shape[1]):
            qb, kb, o, kbar, s = q[b, rows], k[b], grad[b, rows], k_bar[b, rows], s1[b, rows]
            Gb, Gib = (None if M is None else M[b] for M in (G, G_inv))
            logits, c, dp, dc = work.scores(qb, kb)
            p = torch.softmax(_masked(logits.div_(T[b]), mask, rows, float("-inf")), dim=-1)
            g = qb - kbar
            u = _times(g, Gb)
            ds1 = _times(o, Gib, transpose=True)
            if dG_inv is not None:
                dG_inv[b].baddbmm_(s.transpose(-1, -2), o)
            dT2[b] -= (ds1 * s).sum((-1, -2), keepdim=True) / T2[b]
            e = ds1 / T2[b]
            torch.matmul(u, kb.transpose(-1, -2), out=c)
            dr = torch.matmul(e, kb.transpose(-1, -2), out=dp)
            torch.mul(dr, p, out=dc)
            e_kbar, kbar_u = (e * kbar).sum(-1, keepdim=True), (kbar * u).sum(-1, keepdim=True)
            du = (dc @ kb).sub_(kbar * e_kbar)
            dk_t[b].baddbmm_(u.transpose(-1, -2), dc)
            dk_t[b].baddbmm_(e.transpose(-1, -2), torch.mul(c, p, out=dc))  # (rᵀ e)ᵀ
            dg = o + _times(du, Gb, transpose=True)
            if dG is not None:
                dG[b].baddbmm_(g.transpose(-1, -2), du)
            dkbar = -(e * kbar_u + u * e_kbar + dg)
            delta = (e * (s * T2[b] + kbar * kbar_u)).sum(-1, keepdim=True) + (dkbar * kbar).sum(-1, keepdim=True)
            dl = dp.mul_(c).baddbmm_(dkbar, kb.transpose(-1, -2)).sub_(delta).mul_(p)  # ∂L/∂ℓ
            dk_t[b].baddbmm_(dkbar.transpose(-1, -2), p)
            dlk = dl @ kb
            dq[b, rows] = dg + dlk / T[b]
            dT[b] -= (qb * dlk).sum((-1, -2), keepdim=True) / T[b].square()
            dk_t[b].baddbmm_((qb / T[b]).transpose(-1, -2), dl)
        return dq, dk_t.transpose(-1, -2), dT, dT2, dG, dG_inv, None


def newton_direction(q, k, T, T2, G=None, G_inv=None, mask=None):
    """MHA2nd1st's per-head direction (q − k̄) + b, tiled, O(B·H·N) saved memory (no (N, N) tensor kept).

    q, k: (BH, N, d_h); T, T2: (BH, 1, 1) temperatures; G, G_inv: (BH, d_h, d_h) or None (identity);
    mask: None or boolean (N, N). The same numbers as ``newton_first_order_direction(q, k, softmax(q kᵀ/T), G,
    T2, G_inv=G_inv)``, with gradients for every tensor argument.
    """
    return _Newton.apply(q, k, T, T2, G, G_inv, mask)


def _ea_score_mod(score, b, h, q_idx, kv_idx):
    s2 = score * score
    return torch.log(s2) - torch.log1p(s2)  # log(s²/(1+s²)): flex's softmax of it is EA's weights


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@functools.cache
def _compiled_flex():
    """``flex_attention`` under ``torch.compile``, built once per process."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


@functools.lru_cache(maxsize=8)
def _causal_block_mask(n: int, device: torch.device):
    """flex's block mask of the causal (N, N) pattern, built once per length and device (not per forward)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(_causal, None, None, n, n, device=device)


def flex_expressive_attention(q, k, v, causal: bool, scale: float, compiled: bool = True):
    """EA through ``flex_attention`` with the score modification log(s²/(1+s²)): q, k, v (B, H, N, d_h).

    Compiled (the fused kernel) on CUDA; ``compiled=False`` runs flex's reference route (checks on CPU).
    """
    from torch.nn.attention.flex_attention import flex_attention

    fn = _compiled_flex() if compiled else flex_attention
    block_mask = _causal_block_mask(q.shape[-2], q.device) if causal else None
    return fn(q, k, v, score_mod=_ea_score_mod, block_mask=block_mask, scale=scale)


_FLEX_FAILED: list[str] = []  # why the compiled flex route could not be built in this process (then never retried)


def flex_or_none(q, k, v, causal: bool, scale: float):
    """:func:`flex_expressive_attention` where fast path ``"flex-expressive"`` of :data:`energylab.kernels.FAST_PATHS`
    takes these tensors and builds, else None: the caller then runs the tiled kernel. A failed build (no Triton,
    no compiler, an unwritable cache folder) warns once and is not retried in this process."""
    if _FLEX_FAILED or kernels.unsupported("flex-expressive", q, k, v) is not None:
        return None
    try:
        problem = kernels.cache_problem()
        if problem is not None:
            raise OSError(problem)
        return flex_expressive_attention(q, k, v, causal, scale)
    except Exception as err:  # noqa: BLE001 - any build failure: the tiled kernel computes the same weights
        _FLEX_FAILED.append(f"{type(err).__name__}: {err}")
        # on the CPU the tiled kernel runs instead, on a GPU the reference path (kernels.tiled)
        kernels.fall_back("flex-expressive", f"it could not be built ({_FLEX_FAILED[0]})",
                          instead="tiled-expressive" if kernels.tiled(q) else None)
        return None


def expressive_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                     scale: float) -> torch.Tensor | None:
    """Expressive attention on (B, H, N, d_h) heads, the fast way: flex attention on CUDA where it builds
    (:func:`flex_or_none`), the tiled kernel (:func:`expressive_attention`) on the CPU. Returns (B, H, N, d_h), or
    None where neither serves (a GPU without flex: its reference path is the fast one, see :func:`kernels.tiled`;
    a dtype the tiled kernel does not take, with one FastPathWarning)."""
    y = flex_or_none(q, k, v, causal, scale)
    if y is not None:
        return y
    if not kernels.tiled(q):
        return None
    reason = kernels.unsupported("tiled-expressive", q)
    if reason is not None:  # float16: the reference path clamps s², the kernel would return NaN
        kernels.fall_back("tiled-expressive", reason)
        return None
    if fused_attention.usable(q):  # the tile loop in C, reading the heads in place (issue 55)
        return fused_attention.expressive(q, k, v, causal, scale)
    B, H, N, d_h = q.shape
    mask = torch.ones(N, N, dtype=torch.bool, device=q.device).tril() if causal else None
    q, k, v = torch.stack([q, k, v]).flatten(1, 2)  # one copy into the kernel's (B·H, N, d_h) layout, not three
    return expressive_attention(q, k, v, mask, scale).view(B, H, N, d_h)
