"""Bare self-attention as an attractor network of vector spins (D'Amico & Negri, 2024).

Tokens are spins x_i in S^{d-1}, i = 1..N, coupled by position-dependent matrices J_ij (d x d, J_ii = 0).
Token i has its own *local* energy (paper eq. 4, with the inverse temperature lambda of app. V-B)

    e_i(x) = -(1/lambda) log sum_{j != i} exp(lambda x_i^T J_ij x_j),

and the self-attention update is its negative gradient with respect to x_i alone (eq. 3):

    h_i = -de_i/dx_i = sum_{j != i} alpha_ij J_ij x_j,   alpha_ij = softmax_{j != i}(lambda x_i^T J_ij x_j).

Training minimises the pseudo-likelihood loss L = sum_mu sum_i e_i(xi^mu) on data (eq. 7). Its gradient
on J_ij is -alpha_ij x_i x_j^T: it involves e_i only, i.e. the couplings *into* token i, so training is a
local rule with no backpropagation through the dynamics. After every optimiser step J is rescaled to its
initial RMS ("norm fixing", app. V-B), without which L falls forever by inflating J.

Dynamics at test time: x_i <- normalise(x_i + eta h_i) for all i in parallel (eq. 1 with gamma = 1 and
eta = 1; the authors' public code uses eta = 1 - g = 0.5 and divides by the mean token norm instead of
normalising each spin). Shapes: B batch, N tokens, d spin dimension, a pixels per patch (2a spin inputs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from energylab._checks import check_positive, check_tensor


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
    logit_clamp: float | None = 20.0  # clamp x_i^T J_ij x_j from above before the softmax (public code); None = off


def orthonormal_embedding(dim: int, inputs: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """F (d, 2a): columns from a random orthonormal basis of R^d, times 1/sqrt(a) (app. V-A).

    With |s|^2 = a this puts every embedded patch x = F s on the unit sphere, and s = a F^T x inverts it.
    """
    if not (isinstance(dim, int) and isinstance(inputs, int) and inputs % 2 == 0 and dim >= inputs >= 2):
        raise ValueError(f"need an even number of inputs 2a <= dim, got inputs={inputs!r}, dim={dim!r}")
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    return (q[:, :inputs] / math.sqrt(inputs // 2)).to(torch.get_default_dtype())


def coupling_logits(x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """z_bij = x_bi^T J_ij x_bj: (B, N, d), (N, N, d, d) -> (B, N, N). The diagonal is left as computed."""
    return torch.einsum("bid,ijde,bje->bij", x, J, x)


def local_energies(x: torch.Tensor, J: torch.Tensor, lam: float = 1.0, clamp: float | None = None,
                   key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """e_bi = -(1/lam) logsumexp_{j != i}(lam z_bij) (paper eq. 4 with lambda): -> (B, N).

    ``clamp`` caps z from above (the public code uses 20; the clamped energy is not differentiable there);
    ``key_mask`` (B, N) bool removes masked tokens j from every sum.
    """
    z = coupling_logits(x, J)
    if clamp is not None:
        z = z.clamp(max=clamp)
    z = lam * z.masked_fill(_excluded(x.shape[0], x.shape[1], x.device, key_mask), float("-inf"))
    return -torch.logsumexp(z, dim=-1) / lam


def local_field(x: torch.Tensor, J: torch.Tensor, lam: float = 1.0, clamp: float | None = None,
                key_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """h_bi = sum_{j != i} alpha_bij J_ij x_bj = -de_bi/dx_bi (paper eqs. 2-3). Returns (h (B, N, d), alpha (B, N, N))."""
    Jx = torch.einsum("ijde,bje->bijd", J, x)  # (B, N, N, d): the field J_ij x_j that j sends to i
    z = torch.einsum("bid,bijd->bij", x, Jx)
    if clamp is not None:
        z = z.clamp(max=clamp)
    z = lam * z.masked_fill(_excluded(x.shape[0], x.shape[1], x.device, key_mask), float("-inf"))
    alpha = torch.softmax(z, dim=-1)
    return torch.einsum("bij,bijd->bid", alpha, Jx), alpha


def local_gradient(x: torch.Tensor, J: torch.Tensor, lam: float = 1.0) -> torch.Tensor:
    """dL/dJ for L = mean_b sum_i e_bi in closed form: dL/dJ_ij = -mean_b alpha_bij x_bi x_bj^T -> (N, N, d, d).

    Entry (i, j) needs only alpha_ij (computed from e_i's own couplings J_i.) and the two spins it connects.
    """
    _, alpha = local_field(x, J, lam)
    return -torch.einsum("bij,bid,bje->ijde", alpha, x, x) / x.shape[0]


def _excluded(batch: int, n: int, device, key_mask: torch.Tensor | None) -> torch.Tensor:
    """(B or 1, N, N) bool: True where j = i or j is masked."""
    out = torch.eye(n, dtype=torch.bool, device=device).unsqueeze(0)
    if key_mask is not None:
        if key_mask.dtype != torch.bool or tuple(key_mask.shape) != (batch, n):
            raise ValueError(f"key_mask must be bool of shape ({batch}, {n}), got {key_mask.dtype} "
                             f"{tuple(key_mask.shape)}")
        out = out | key_mask.unsqueeze(1)  # (B, 1, N): column j masked for every i
    return out


def normalize_spins(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Project every token back onto the unit sphere: x_i / |x_i| (a zero token stays zero)."""
    return x / x.norm(dim=-1, keepdim=True).clamp(min=eps)


class BareSelfAttention(nn.Module):
    """The attractor network: fixed embedding F, trainable couplings J (N, N, d, d) with J_ii = 0.

    ``forward(s)`` returns the local energies e_i (B, N) of embedded spins at lambda_train (the training
    loss is their mean); ``run`` iterates the dynamics at lambda_test. Neither modifies the module; the norm
    fixing is the explicit :meth:`fix_norm_`, called by the training loop after each optimiser step.
    """

    def __init__(self, config: AttractorConfig, generator: torch.Generator | None = None):
        super().__init__()
        n, a, d = config.n_tokens, config.patch_pixels, config.dim
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
        self.register_buffer("j_rms", J.pow(2).mean().sqrt())  # the norm that fix_norm_ restores

    @property
    def n_couplings(self) -> int:
        """Number of floats in J: N^2 d^2."""
        return self.J.numel()

    def embed(self, spins: torch.Tensor) -> torch.Tensor:
        """x_i = F s_i: (B, N, 2a) -> (B, N, d). Pixel spins land on the unit sphere; zero spins stay zero."""
        check_tensor("spins", spins, 3)
        return torch.einsum("de,bne->bnd", self.F, spins)

    def de_embed(self, x: torch.Tensor) -> torch.Tensor:
        """s_i = a F^T x_i: (B, N, d) -> (B, N, 2a), the exact inverse of :meth:`embed` on its image."""
        return self.config.patch_pixels * torch.einsum("de,bnd->bne", self.F, x)

    def energies(self, x: torch.Tensor, lam: float | None = None) -> torch.Tensor:
        """Local energies e_i (B, N) of embedded spins x (B, N, d); lambda defaults to lam_train."""
        lam = self.config.lam_train if lam is None else lam
        return local_energies(x, self.J, lam, self.config.logit_clamp)

    def forward(self, spins: torch.Tensor, sites: torch.Tensor | None = None) -> torch.Tensor:
        """Pseudo-likelihood terms at lambda_train: all e_i (B, N), or e_{sites[b]} (B,) if sites (B,) is given.

        The one-site form is what the public code trains (a random i per batch); it needs only the rows J_i.
        """
        x = self.embed(spins)
        if sites is None:
            return self.energies(x)
        Ji = self.J[sites]  # (B, N, d, d): the couplings into the chosen token of each image
        xi = x[torch.arange(x.shape[0], device=x.device), sites]  # (B, d)
        z = torch.einsum("bd,bjde,bje->bj", xi, Ji, x)
        if self.config.logit_clamp is not None:
            z = z.clamp(max=self.config.logit_clamp)
        lam = self.config.lam_train
        self_mask = nn.functional.one_hot(sites, x.shape[1]).bool()  # (B, N): j = i excluded
        return -torch.logsumexp(lam * z.masked_fill(self_mask, float("-inf")), dim=-1) / lam

    @torch.no_grad()
    def fix_norm_(self) -> None:
        """Rescale J to its initial RMS and re-zero J_ii (app. V-B "the L2 norm of the matrix is kept fixed")."""
        self.J.mul_(self.off_diagonal)
        self.J.mul_(self.j_rms / self.J.pow(2).mean().sqrt().clamp(min=1e-30))

    def step(self, x: torch.Tensor, lam: float | None = None, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """One parallel update x_i <- normalise(x_i + eta h_i) at lambda (default lam_test): (B, N, d) -> (B, N, d)."""
        lam = self.config.lam_test if lam is None else lam
        h, _ = local_field(x, self.J, lam, self.config.logit_clamp, key_mask)
        return normalize_spins(x + self.config.eta * h)

    @torch.no_grad()
    def run(self, x: torch.Tensor, steps: int, lam: float | None = None,
            key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Iterate :meth:`step` ``steps`` times; returns the trajectory (steps + 1, B, N, d), x first.

        ``key_mask`` (masked tokens) is applied to the first step only: masked tokens start as zero spins
        and are not attended to until they have received a field (as in the authors' code).
        """
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be a non-negative int, got {steps!r}")
        traj = [x]
        for t in range(steps):
            traj.append(self.step(traj[-1], lam, key_mask if t == 0 else None))
        return torch.stack(traj)


class RecurrentBlock(nn.Module):
    """Baseline of the paper (sec. III, app. V-C): one pre-LN transformer block applied tau times.

    u = SA(LN(x)) + x,  x <- MLP(LN(u)) + u  (eqs. 8-9), with a trained input embedding plus a learned
    positional encoding, which is subtracted again before the trained read-out to pixels (sigmoid keeps
    them in [0, 1]). Trained with backpropagation through all tau repetitions. The block is PyTorch's
    ``nn.TransformerEncoderLayer(norm_first=True)``, which computes exactly eqs. 8-9 (dropout off).
    """

    def __init__(self, n_tokens: int, patch_pixels: int, width: int = 32, heads: int = 2, mlp: int = 64):
        super().__init__()
        self.embed = nn.Linear(2 * patch_pixels, width)  # spins (2a) -> width
        self.pos = nn.Parameter(0.02 * torch.randn(n_tokens, width))  # (N, width)
        self.block = nn.TransformerEncoderLayer(width, heads, mlp, dropout=0.0, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.readout = nn.Linear(width, patch_pixels)  # width -> a pixels

    def trajectory(self, spins: torch.Tensor, steps: int) -> torch.Tensor:
        """Pixel predictions after each of ``steps`` repetitions: (B, N, 2a) -> (steps, B, N, a)."""
        check_tensor("spins", spins, 3)
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive int, got {steps!r}")
        x = self.embed(spins) + self.pos  # (B, N, width)
        out = []
        for _ in range(steps):
            x = self.block(x)
            out.append(torch.sigmoid(self.readout(x - self.pos)))
        return torch.stack(out)

    def forward(self, spins: torch.Tensor, tau: int) -> torch.Tensor:
        """Pixels (B, N, a) after tau repetitions."""
        return self.trajectory(spins, tau)[-1]


__all__ = ["AttractorConfig", "BareSelfAttention", "RecurrentBlock", "orthonormal_embedding", "coupling_logits", "local_energies",
           "local_field", "local_gradient", "normalize_spins"]
