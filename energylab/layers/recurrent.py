"""Recurrent self-attention beyond energies: ItrSA and an AKOrN-style Kuramoto layer (paper 003, AKOrN).

Two looped layers for :mod:`energylab.models.looped` (``forward(x, c)`` maps (B, N, d) states and the injected
board c (B, N, d) or None to the next state):

* **ItrSA** (Tomihari & Karakida, eq. 9): X ← RMSNorm_γ(X + η (C + MSA(X))), η a learnable scalar (init 1),
  RMSNorm over the whole token with a learnable gain γ; ``norm=False`` drops the normalisation:
  X ← X + η (C + MSA(X)). Registered as ``"itrsa"`` and ``"itrsa-nonorm"``.
* **Kuramoto layer** (Miyato et al. 2025, AKOrN; paper 003 eqs. 7-8): the d channels of a token are split into
  d/n oscillators of size n, each kept on its unit sphere,

      y = C + MSA(X)                                   stimulus plus coupling by attention
      X ← Π( X + γ (Ω X + y − ⟨y, X⟩ X) )              Ω antisymmetric, ⟨·,·⟩ and Π per oscillator

  Ω rotates each consecutive channel pair by a frequency ω (the reference: one global ω = 0.1, not learned);
  γ is a learnable step (init 1). ``rmsnorm=True`` replaces Π by a per-oscillator RMSNorm with a learnable
  gain per channel (paper 003's fix; the gain is initialised to 1 so that it starts at Π). Registered as
  ``"akorn"`` and ``"akorn-rmsnorm"``. The reference code's quirk: with ``use_omega=False`` its Ω layer is an
  identity, so its update adds x itself, x + γ(x + P y), which Π maps to Π(x + γ/(1+γ) P y): the effective step
  is γ/(1+γ) (see :func:`akorn_reference_step`). AKOrN reads out by the norm of a linear map of each
  oscillator (:class:`NormReadout`); the looped harness keeps its own RMSNorm + linear readout.

Both expose ``drive(x, c) = C + MSA(X)`` (the pseudo-energy's Y) and ``step(x, c)`` with the same output as
``forward``. Attention is written out (no fused kernel) so that torch.func's jvp/vjp pass through it.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from energylab._checks import check_bool, check_int, check_interval, check_positive
from energylab.layers.registry import register_layer

__all__ = ["MSA", "ItrSA", "KuramotoLayer", "NormReadout", "oscillator_normalize", "omega_rotate",
           "akorn_reference_step"]


class MSA(nn.Module):
    """Multi-head softmax self-attention without biases, MSA(X) = Σ_h softmax(X W_Q,h W_K,hᵀ Xᵀ/√d_h) X W_V,h W_O,h.

    Separate q, k, v, o maps (``nn.Linear``: weight (d_out, d_in), so W_Q = q.weight.T etc.) so that the
    regularisers can read the per-head blocks. x (B, N, d) or (N, d) -> same shape.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        dim, heads = check_int("dim", dim, minimum=1), check_int("heads", heads, minimum=1)
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads, self.dim = heads, dim
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def head_blocks(self):
        """Per-head (W_Q,h, W_K,h, W_V,h, W_O,h): (H, d, d_h) three times and W_O,h (H, d_h, d)."""
        H, d = self.heads, self.dim
        split = [w.weight.T.reshape(d, H, d // H).transpose(0, 1) for w in (self.q, self.k, self.v)]
        return (*split, self.o.weight.T.reshape(H, d // H, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_tokens(x, self.dim)
        *lead, N, d = x.shape
        H = self.heads
        q, k, v = (w(x).reshape(*lead, N, H, d // H).transpose(-2, -3) for w in (self.q, self.k, self.v))
        attn = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // H), dim=-1)  # (..., H, N, N)
        return self.o((attn @ v).transpose(-2, -3).reshape(*lead, N, d))


def _check_tokens(x, dim: int) -> None:
    """x: a floating (..., N, d) tensor with d = dim; shapes and dtype only (no values read back: it runs every
    iteration). A wrong width or a 1-dim x was a raw matmul or unpacking error."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor of tokens (..., N, d={dim}), "
                        f"got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() < 2 or x.shape[-1] != dim:
        raise ValueError(f"x must have shape (..., N, d={dim}), got {tuple(x.shape)}")


def _with_input(y: torch.Tensor, c) -> torch.Tensor:
    """C + MSA(X): c None, or a tensor broadcasting to the tokens' shape (a mismatch was a raw broadcasting error)."""
    if c is None:
        return y
    if not isinstance(c, torch.Tensor) or not c.is_floating_point():
        raise TypeError(f"c must be None or a floating-point torch.Tensor, got {getattr(c, 'dtype', type(c).__name__)}")
    try:
        fits = torch.broadcast_shapes(c.shape, y.shape) == y.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"c must have the tokens' shape {tuple(y.shape)} (or broadcast to it), got {tuple(c.shape)}")
    return y + c


class ItrSA(nn.Module):
    """X ← RMSNorm_γ(X + η (C + MSA(X))) (paper 003, eq. 9); ``norm=False``: X ← X + η (C + MSA(X))."""

    def __init__(self, dim: int, heads: int, ffn_mult: int = 4, norm: bool = True, eta: float = 1.0):
        super().__init__()
        eta = check_interval("eta", eta)  # finite: a NaN or infinite step made every state NaN without a word
        check_bool("norm", norm)
        self.msa = MSA(dim, heads)
        self.eta = nn.Parameter(torch.tensor(eta))  # learnable step η (paper 003: init 1)
        self.norm = nn.RMSNorm(dim) if norm else nn.Identity()

    def drive(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        """Y = C + MSA(X), the part of the step inside the normalisation (c None: C = 0)."""
        return _with_input(self.msa(x), c)

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        return self.norm(x + self.eta * self.drive(x, c))

    step = forward


def _check_oscillators(x, n) -> int:
    """n: an int >= 1 dividing the last dim of the floating tensor x; shapes and dtype only, no values."""
    n = check_int("n", n, minimum=1)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() < 1 or x.shape[-1] % n:
        raise ValueError(f"the last dim of x must be a multiple of the oscillator size n={n}, got shape "
                         f"{tuple(x.shape)}")
    return n


def oscillator_normalize(x: torch.Tensor, n: int, eps: float = 1e-12) -> torch.Tensor:
    """Π: every block of n consecutive channels scaled to unit norm. x (..., d) with n | d -> (..., d)."""
    _check_oscillators(x, n)
    eps = check_positive("eps", eps, scalar=True)
    blocks = x.unflatten(-1, (-1, n))
    return (blocks / blocks.norm(dim=-1, keepdim=True).clamp_min(eps)).flatten(-2)


def omega_rotate(x: torch.Tensor, omega) -> torch.Tensor:
    """Ω x with Ω block-diagonal, one 2 × 2 block [[0, ω], [−ω, 0]] per channel pair (AKOrN's Omega layer):
    (x_0, x_1) ↦ (ω x_1, −ω x_0). x (..., d), d even; omega a scalar or (d/2,)."""
    _check_oscillators(x, 2)  # channel pairs
    if not isinstance(omega, torch.Tensor):  # a tensor (a buffer, on the training path) is not read back here
        check_interval("omega", omega)
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((omega * pairs[..., 1], -omega * pairs[..., 0]), dim=-1).flatten(-2)


def akorn_reference_step(x, y, gamma, n: int):
    """The reference code's update with ``use_omega=False`` (its Ω is an identity): Π(x + γ(x + y − ⟨y,x⟩x)).

    x: (..., d) unit oscillators, y the stimulus plus coupling. Equals Π(x + γ/(1+γ) (y − ⟨y,x⟩x)).
    """
    _check_oscillators(x, n)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        raise ValueError(f"y must be a tensor of x's shape {tuple(x.shape)}, got "
                         f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
    if not isinstance(gamma, torch.Tensor):
        check_interval("gamma", gamma)
    blocks_x, blocks_y = x.unflatten(-1, (-1, n)), y.unflatten(-1, (-1, n))
    tangent = blocks_y - (blocks_x * blocks_y).sum(-1, keepdim=True) * blocks_x
    return oscillator_normalize((blocks_x + gamma * (blocks_x + tangent)).flatten(-2), n)


class KuramotoLayer(nn.Module):
    """AKOrN-style Kuramoto layer with attention coupling: X ← Π(X + γ(ΩX + y − ⟨y,X⟩X)), y = C + MSA(X).

    Oscillators of size ``n`` (d/n per token); ``omega``: the frequency of Ω (None: no Ω term; the reference's
    Sudoku model uses one global ω = 0.1, not learned); γ learnable (init ``gamma``). ``rmsnorm``: Π followed by a
    learnable per-channel gain (a per-oscillator RMSNorm; gain init 1). The input x is normalised per oscillator
    first (as the reference does at the start of its loop), so x_0 = c works.
    """

    def __init__(self, dim: int, heads: int, ffn_mult: int = 4, n: int = 4, omega: float | None = 0.1,
                 gamma: float = 1.0, rmsnorm: bool = False):
        super().__init__()
        dim, n = check_int("dim", dim, minimum=1), check_int("n", n, minimum=2)
        check_bool("rmsnorm", rmsnorm)
        if dim % n or n % 2:
            raise ValueError(f"oscillator size n ({n}) must be even and divide dim ({dim})")
        gamma = check_interval("gamma", gamma)  # finite: a NaN one made every state NaN without a word
        omega = None if omega is None else check_interval("omega", omega)
        self.n, self.msa = n, MSA(dim, heads)
        self.gamma = nn.Parameter(torch.tensor(gamma))
        self.register_buffer("omega", None if omega is None else torch.tensor(omega))
        self.gain = nn.Parameter(torch.ones(dim)) if rmsnorm else None

    def drive(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        """y = C + MSA(X) on the normalised oscillators X (c None: C = 0)."""
        return _with_input(self.msa(x), c)

    def _renorm(self, x: torch.Tensor) -> torch.Tensor:
        """Π, or Π then the gain; for the state fed to the next step (a gain ≠ 1 leaves the sphere)."""
        x = oscillator_normalize(x, self.n)
        return x if self.gain is None else x * self.gain

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        x = oscillator_normalize(x, self.n)
        y = self.drive(x, c)
        bx, by = x.unflatten(-1, (-1, self.n)), y.unflatten(-1, (-1, self.n))
        update = (by - (bx * by).sum(-1, keepdim=True) * bx).flatten(-2)  # tangent part, per oscillator
        if self.omega is not None:
            update = update + omega_rotate(x, self.omega)
        return self._renorm(x + self.gamma * update)

    step = forward


class NormReadout(nn.Module):
    """AKOrN's readout by norm: ‖(W x)_k‖ + b_k for each oscillator k of W x (W: d -> d_out·n). (..., d) ->
    (..., d_out): invariant to the phase of the oscillators, it reads their amplitudes."""

    def __init__(self, dim: int, out: int, n: int):
        super().__init__()
        dim, out, n = (check_int(name, v, minimum=1) for name, v in (("dim", dim), ("out", out), ("n", n)))
        self.n, self.lin = n, nn.Linear(dim, out * n, bias=False)
        self.bias = nn.Parameter(torch.zeros(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 1 \
                or x.shape[-1] != self.lin.in_features:
            raise ValueError(f"x must be a floating-point tensor (..., d={self.lin.in_features}), got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}"
                             f"{' of dtype ' + str(x.dtype) if isinstance(x, torch.Tensor) else ''}")
        return self.lin(x).unflatten(-1, (-1, self.n)).norm(dim=-1) + self.bias


def _itrsa(dim, heads, ffn_mult=4):
    return ItrSA(dim, heads, ffn_mult, norm=True)


def _itrsa_nonorm(dim, heads, ffn_mult=4):
    return ItrSA(dim, heads, ffn_mult, norm=False)


def _akorn(dim, heads, ffn_mult=4):
    return KuramotoLayer(dim, heads, ffn_mult, rmsnorm=False)


def _akorn_rmsnorm(dim, heads, ffn_mult=4):
    return KuramotoLayer(dim, heads, ffn_mult, rmsnorm=True)


register_layer("itrsa", _itrsa)
register_layer("itrsa-nonorm", _itrsa_nonorm)
register_layer("akorn", _akorn)
register_layer("akorn-rmsnorm", _akorn_rmsnorm)
