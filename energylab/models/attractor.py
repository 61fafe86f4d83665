"""Bare self-attention as an attractor network of vector spins (D'Amico & Negri, 2024).

Tokens are spins x_i in S^{d-1}, i = 1..N, coupled by position-dependent matrices J_ij (d x d, J_ii = 0).
Token i has its own *local* energy (paper eq. 4, with the inverse temperature lambda of app. V-B)

    e_i(x) = -(1/lambda) log sum_{j != i} exp(lambda x_i^T J_ij x_j),

and the self-attention update is its negative gradient with respect to x_i alone (eq. 3):

    h_i = -de_i/dx_i = sum_{j != i} alpha_ij J_ij x_j,   alpha_ij = softmax_{j != i}(lambda x_i^T J_ij x_j).

Both formulas live once in the library, as the catalog form ``local_self_attention``:
:func:`energylab.forms.local.local_energies` and :func:`energylab.forms.local.local_attention_update`;
the model differentiates the former. This module adds what turns them into a trained model: the fixed embedding, the
couplings, norm fixing and the dynamics.

Training minimises the pseudo-likelihood loss L = sum_mu sum_i e_i(xi^mu) on data (eq. 7). Its gradient
on J_ij is -alpha_ij x_i x_j^T: it involves e_i only, i.e. the couplings *into* token i, so training is a
local rule with no backpropagation through the dynamics. After every optimiser step J is rescaled to its
initial RMS ("norm fixing", app. V-B), without which L falls forever by inflating J.

Dynamics at test time: x_i <- normalise(x_i + eta h_i) for all i in parallel (eq. 1 with gamma = 1 and
eta = 1; the authors' public code uses eta = 1 - g = 0.5, divides by the mean token norm instead of
normalising each spin, clamps the logits at 20 and leaves masked tokens out of the first softmax; we do
none of these by default, and the last one with ``drop_masked=True``). Shapes: B batch, N tokens, d spin
dimension, a pixels per patch (2a spin inputs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from energylab._checks import (
    check_bool,
    check_count,
    check_divides,
    check_instance,
    check_int,
    check_positive,
    check_tensor,
    value_checks_off,
)
from energylab.forms.local import local_energies
from energylab.portable import exact_sqrt
from energylab.sphere import normalize


@dataclass
class AttractorConfig:
    """Shape and temperatures of the bare self-attention network."""

    n_tokens: int = 49  # N: 14x14 images in 2x2 patches (28x28 MNIST gives 196)
    patch_pixels: int = 4  # a: pixels per patch; a spin input has 2a components
    dim: int = 8  # d >= 2a: spin dimension (the authors' code uses d = 8 for 2x2 patches)
    init: str = "code"  # "code": J ~ U(+-1/(2d^2)) as in the public code; "paper": U(+-1/(2d)) as in app. V-B
    lam_train: float = 5.0  # lambda in the loss (app. V-B: 5 in training)
    lam_test: float = 1.0  # lambda in the dynamics (app. V-B: 1 at test)
    eta: float = 1.0  # weight of the field in x + eta h (paper gamma = 1 <=> eta = 1; public code 0.5)
    drop_masked: bool = False  # leave zero (masked) spins out of every softmax, as the public code does at t = 1


def orthonormal_embedding(dim: int, inputs: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """F (d, 2a): columns from a random orthonormal basis of R^d, times 1/sqrt(a) (app. V-A).

    With |s|^2 = a this puts every embedded patch x = F s on the unit sphere, and s = a F^T x inverts it.
    """
    if not (isinstance(dim, int) and isinstance(inputs, int) and inputs % 2 == 0 and dim >= inputs >= 2):
        raise ValueError(f"need an even number of inputs 2a <= dim, got inputs={inputs!r}, dim={dim!r}")
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    return (q[:, :inputs] / math.sqrt(inputs // 2)).to(torch.get_default_dtype())


def correlation_couplings(x: torch.Tensor) -> torch.Tensor:
    """C_ij = mean_b x_bi x_bj^T with C_ii = 0: (B, N, d) -> (N, N, d, d).

    The minimiser of the pseudo-likelihood loss at fixed |J| when lambda -> 0: there e_i is linear in J,
    e_i = -(1/(N-1)) sum_j x_i^T J_ij x_j + const, so the loss is -<J, C> and on a sphere of J its minimum
    is J proportional to C, a Hebbian rule.
    """
    check_tensor("x", x, 3)
    check_count("x", x, 0, what="sample", why="a mean over no samples is NaN")
    n = x.shape[1]
    off = 1.0 - torch.eye(n, dtype=x.dtype, device=x.device).reshape(n, n, 1, 1)
    return torch.einsum("bid,bje->ijde", x, x) / x.shape[0] * off


class BareSelfAttention(nn.Module):
    """The attractor network: fixed embedding F, trainable couplings J (N, N, d, d) with J_ii = 0.

    ``forward(s)`` returns the local energies e_i (B, N) of embedded spins at lambda_train (the training
    loss is their mean); ``run`` iterates the dynamics at lambda_test. Neither modifies the module; the norm
    fixing is the explicit :meth:`fix_norm_`, called by the training loop after each optimiser step.
    """

    def __init__(self, config: AttractorConfig, generator: torch.Generator | None = None):
        super().__init__()
        check_instance("config", config, AttractorConfig)
        n, a, d = config.n_tokens, config.patch_pixels, config.dim
        check_int("n_tokens", n, minimum=2)
        check_int("patch_pixels", a, minimum=1)
        check_int("dim", d, minimum=2)
        check_bool("drop_masked", config.drop_masked)  # each token's local energy is a softmax over the others
        if config.init not in ("code", "paper"):
            raise ValueError(f"init must be 'code' or 'paper', got {config.init!r}")
        for name in ("lam_train", "lam_test", "eta"):
            check_positive(name, getattr(config, name))
        self.config = config
        self.register_buffer("F", orthonormal_embedding(d, 2 * a, generator))  # (d, 2a)
        half = 1.0 / (2 * d * d) if config.init == "code" else 1.0 / (2 * d)
        off = 1.0 - torch.eye(n).reshape(n, n, 1, 1)  # (N, N, 1, 1): zero on i = j
        self.register_buffer("off_diagonal", off)
        J = (2 * torch.rand(n, n, d, d, generator=generator) - 1) * half * off  # U(-half, half), J_ii = 0
        self.J = nn.Parameter(J)
        self.register_buffer("j_rms", exact_sqrt(J.pow(2).mean()))  # the norm that fix_norm_ restores

    @property
    def n_couplings(self) -> int:
        """Number of floats in J: N^2 d^2."""
        return self.J.numel()

    def embed(self, spins: torch.Tensor) -> torch.Tensor:
        """x_i = F s_i: (B, N, 2a) -> (B, N, d). Pixel spins land on the unit sphere; zero spins stay zero."""
        check_tensor("spins", spins, 3)
        _check_shape("spins", spins, (self.config.n_tokens, self.F.shape[1]), "(B, N, 2a)")
        return torch.einsum("de,bne->bnd", self.F, spins)

    def de_embed(self, x: torch.Tensor) -> torch.Tensor:
        """s_i = a F^T x_i: (B, N, d) -> (B, N, 2a), the exact inverse of :meth:`embed` on its image."""
        check_tensor("x", x, 3)
        _check_shape("x", x, (self.config.n_tokens, self.F.shape[0]), "(B, N, d)")
        return self.config.patch_pixels * torch.einsum("de,bnd->bne", self.F, x)

    def energies(self, x: torch.Tensor, lam: float | None = None) -> torch.Tensor:
        """Local energies e_i (B, N) of embedded spins x (B, N, d); lambda defaults to lam_train."""
        lam = self.config.lam_train if lam is None else lam
        return local_energies(x, x, self.J, lam)

    def forward(self, spins: torch.Tensor, sites: torch.Tensor | None = None) -> torch.Tensor:
        """Pseudo-likelihood terms at lambda_train: all e_i (B, N), or e_{sites[b]} (B,) if sites (B,) is given.

        The one-site form is what the public code trains on (a random i per image); the gradient is the same
        in expectation, with N times fewer terms.
        """
        e = self.energies(self.embed(spins))
        if sites is None:
            return e
        if not isinstance(sites, torch.Tensor) or sites.is_floating_point() or sites.dtype == torch.bool:
            raise TypeError(f"sites must be an integer tensor of token indices, "
                            f"got {getattr(sites, 'dtype', type(sites).__name__)}")
        if sites.shape != e.shape[:1]:
            raise ValueError(f"sites must have shape ({e.shape[0]},) (one token index per image), "
                             f"got {tuple(sites.shape)}")
        n = e.shape[1]  # one read-back at entry: 9 was an IndexError, -1 picked the last token without a word
        if sites.numel() and not value_checks_off():
            lo, hi = torch.stack(torch.aminmax(sites)).tolist()
            if lo < 0 or hi >= n:
                raise ValueError(f"sites must lie in 0..{n - 1} (token indices), got values {lo}..{hi}")
        return e[torch.arange(e.shape[0], device=e.device), sites]

    @torch.no_grad()
    def fix_norm_(self) -> None:
        """Rescale J to its initial RMS and re-zero J_ii (app. V-B "the L2 norm of the matrix is kept fixed")."""
        self.J.mul_(self.off_diagonal)
        self.J.mul_(self.j_rms / exact_sqrt(self.J.pow(2).mean()).clamp(min=1e-30))  # IEEE sqrt: processor-free

    def field(self, x: torch.Tensor, lam: float | None = None) -> torch.Tensor:
        """h_i = -de_i/dx_i at lambda (default lam_test): (B, N, d) -> (B, N, d).

        Computed by autograd from the energy with the context held fixed, i.e. by the definition (eq. 3);
        it equals :func:`energylab.forms.local.local_attention_update` (a test checks it), and one autograd pass
        through the energy is faster than that operator at these sizes.
        """
        lam = self.config.lam_test if lam is None else lam
        if self.config.drop_masked:  # checked here as local_energies checks the other route: a NaN lam gave h = 0
            check_tensor("x", x, 3)
            return self._field_without_masked(x, check_positive("lam", lam))
        with torch.enable_grad():
            own = x.detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(local_energies(own, x.detach(), self.J.detach(), lam).sum(), own)
        return -grad

    def _field_without_masked(self, x: torch.Tensor, lam: float) -> torch.Tensor:
        """h_i = sum_j alpha_ij J_ij x_j with the softmax over the non-zero spins j != i only: (B, N, d) -> (B, N, d).

        A zero spin adds a logit 0 and no field, so dropping it only renormalises the weights of the others; the
        direction of a masked token's own field (uniform weights) is unchanged. A token whose keys are all zero
        gets h_i = 0.
        """
        n = x.shape[-2]
        Jx = torch.einsum("ijac,bjc->bija", self.J.detach(), x)  # (B, N, N, d): J_ij x_j
        logits = lam * torch.einsum("bia,bija->bij", x, Jx)  # (B, N, N)
        keep = (x.abs().sum(-1) > 0).unsqueeze(1) & ~torch.eye(n, dtype=torch.bool, device=x.device)  # (B, 1|N, N)
        alpha = torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
        return torch.einsum("bij,bija->bia", alpha, Jx)

    def step(self, x: torch.Tensor, lam: float | None = None) -> torch.Tensor:
        """One parallel update x_i <- normalise(x_i + eta h_i): (B, N, d) -> (B, N, d)."""
        return normalize(x + self.config.eta * self.field(x, lam), eps=1e-12)  # a zero (masked) token stays zero

    @torch.no_grad()
    def run(self, x: torch.Tensor, steps: int, lam: float | None = None) -> torch.Tensor:
        """Iterate :meth:`step` ``steps`` times; returns the trajectory (steps + 1, B, N, d), x first.

        A masked token enters as a zero spin: it attends uniformly (all its logits are 0) and sends no field.
        """
        steps = check_int("steps", steps, minimum=0)
        traj = [x]
        for _ in range(steps):
            traj.append(self.step(traj[-1], lam))
        return torch.stack(traj)


def _check_shape(name: str, x: torch.Tensor, tail: tuple[int, int], layout: str) -> None:
    """x's last two dims must be ``tail`` (tokens and channels)."""
    if tuple(x.shape[1:]) != tail:
        raise ValueError(f"{name} must have shape {layout} = (B, {tail[0]}, {tail[1]}), got {tuple(x.shape)}")


def _check_sizes(n_tokens, patch_pixels, width, heads, mlp) -> None:
    """The baselines' sizes: positive ints, heads dividing the width."""
    for name, value in (("n_tokens", n_tokens), ("patch_pixels", patch_pixels), ("width", width), ("mlp", mlp)):
        check_int(name, value, minimum=1)
    check_divides("heads", heads, width)


def _encoder_layer(width: int, heads: int, mlp: int) -> nn.TransformerEncoderLayer:
    """One pre-LN block, u = SA(LN(x)) + x, x <- MLP(LN(u)) + u (paper eqs. 8-9; dropout off, GELU)."""
    return nn.TransformerEncoderLayer(width, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                      norm_first=True)


class _PixelTransformer(nn.Module):
    """What both backprop baselines share: trained embedding of the spins plus a learned positional encoding,
    and a read-out to pixels after subtracting that encoding again (sigmoid keeps them in [0, 1])."""

    def _embed(self, spins: torch.Tensor) -> torch.Tensor:
        check_tensor("spins", spins, 3)
        _check_shape("spins", spins, (self.pos.shape[0], self.embed.in_features), "(B, N, 2a)")
        return self.embed(spins) + self.pos  # (B, N, width)

    def _read(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.readout(x - self.pos))  # (B, N, width) -> (B, N, a)


class RecurrentBlock(_PixelTransformer):
    """Baseline of the paper (sec. III, app. V-C): one pre-LN transformer block applied tau times.

    u = SA(LN(x)) + x,  x <- MLP(LN(u)) + u  (eqs. 8-9), with a trained input embedding plus a learned
    positional encoding, which is subtracted again before the trained read-out to pixels (sigmoid keeps
    them in [0, 1]). Trained with backpropagation through all tau repetitions. The block is PyTorch's
    ``nn.TransformerEncoderLayer(norm_first=True)``, which computes exactly eqs. 8-9 (dropout off).
    """

    def __init__(self, n_tokens: int, patch_pixels: int, width: int = 32, heads: int = 2, mlp: int = 64):
        super().__init__()
        _check_sizes(n_tokens, patch_pixels, width, heads, mlp)
        self.embed = nn.Linear(2 * patch_pixels, width)  # spins (2a) -> width
        self.pos = nn.Parameter(0.02 * torch.randn(n_tokens, width))  # (N, width)
        self.block = _encoder_layer(width, heads, mlp)
        self.readout = nn.Linear(width, patch_pixels)  # width -> a pixels

    def trajectory(self, spins: torch.Tensor, steps: int) -> torch.Tensor:
        """Pixel predictions after each of ``steps`` repetitions: (B, N, 2a) -> (steps, B, N, a)."""
        steps = check_int("steps", steps, minimum=1)  # True passed as 1 before, a NumPy int was refused
        x = self._embed(spins)
        out = []
        for _ in range(steps):
            x = self.block(x)
            out.append(self._read(x))
        return torch.stack(out)

    def forward(self, spins: torch.Tensor, tau: int) -> torch.Tensor:
        """Pixels (B, N, a) after tau repetitions."""
        return self.trajectory(spins, check_int("tau", tau, minimum=1))[-1]


class PatchViT(_PixelTransformer):
    """The paper's second baseline (sec. III, Figs. 1-2): a plain vision transformer of ``layers`` blocks.

    The same pre-LN block, embedding, positional encoding and read-out as :class:`RecurrentBlock`, but
    ``layers`` blocks with their own weights, applied once each (the paper's "standard 5-layer transformer";
    it is not iterated). Trained with backpropagation, once per task.
    """

    def __init__(self, n_tokens: int, patch_pixels: int, width: int = 32, heads: int = 2, mlp: int = 64,
                 layers: int = 5):
        super().__init__()
        check_int("layers", layers, minimum=1)
        _check_sizes(n_tokens, patch_pixels, width, heads, mlp)
        self.embed = nn.Linear(2 * patch_pixels, width)
        self.pos = nn.Parameter(0.02 * torch.randn(n_tokens, width))
        self.blocks = nn.ModuleList(_encoder_layer(width, heads, mlp) for _ in range(layers))
        self.readout = nn.Linear(width, patch_pixels)

    def forward(self, spins: torch.Tensor) -> torch.Tensor:
        """Pixels (B, N, a) of spins (B, N, 2a) after all layers."""
        x = self._embed(spins)
        for block in self.blocks:
            x = block(x)
        return self._read(x)


__all__ = ["AttractorConfig", "BareSelfAttention", "RecurrentBlock", "PatchViT", "orthonormal_embedding",
           "correlation_couplings"]
