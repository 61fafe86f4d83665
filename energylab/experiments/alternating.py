"""Algorithm 1 of paper 000: training as alternating optimisation, on a small set-classification task (chapter 2).

Add F* to a classifier's loss as a regulariser, and training alternates two descents (paper 000, Sec. 2.2,
Algorithm 1): every epoch takes one forward step z_m ← z_m − η ∇_z F*(z_m; H_m, W) on each sample's state (one
attention layer, looped over epochs: each sample keeps its z_m), then one step on W (descending F*, as written, or
CE + F*: ``w_objective="joint"``) and one on the readout E (descending CE(Eᵀz, y)). Full batch, float64.

The task (:func:`cluster_task`): which of C centres does the densest group of a sample's N tokens sit at? The
experiment trains one classifier per rate on W in ``rates_W`` on the same data and records, per epoch, mean F*,
CE and the train and test accuracy. ``run(config, out_dir, resume)``: with ``out_dir`` each finished rate's
history is checkpointed in ``out_dir/lr_W=<rate>``, and ``resume`` reuses it (a rate trains in seconds, so an
unfinished one restarts), as the Hopfield grid does with its rows.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field

import torch

from energylab._checks import (
    check_instance,
    check_int,
    check_interval,
    check_labels,
    check_positive,
    check_same_dtype,
    check_tensor,
)
from energylab.engine.results import History, Results
from energylab.engine.runs import claim_run_dir, config_record, load_checkpoint, save_checkpoint
from energylab.forms.free_energy import softmax_free_energy

CHAPTER = "02_attention_as_descent"  # the chapter that runs it: notebooks/02_attention_as_descent.ipynb

__all__ = ["Config", "PROFILES", "COST", "run", "cluster_task", "per_sample_free_energy", "AlternatingConfig",
           "AlternatingHistory", "alternating_optimisation"]


def cluster_task(n_samples: int, n_tokens: int = 16, dim: int = 8, n_classes: int = 4, in_cluster: float = 0.5,
                 radius: float = 3.0, spread: float = 0.5, noise: float = 2.0,
                 generator: torch.Generator | None = None, dtype=torch.float64):
    """A set-classification task for Algorithm 1: which of C centres does the densest group of tokens sit at?

    Each sample has round(in_cluster·N) tokens around its class centre (radius ``radius``, Gaussian ``spread``)
    and the rest are distractors N(0, noise²). Returns H (M, N, d) with tokens shuffled, labels y (M,).
    """
    n_samples = check_int("n_samples", n_samples, minimum=0)
    n_tokens = check_int("n_tokens", n_tokens, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    n_classes = check_int("n_classes", n_classes, minimum=1)
    in_cluster = check_interval("in_cluster", in_cluster, 0, 1)  # a fraction of the tokens
    radius = check_positive("radius", radius, scalar=True)
    spread = check_positive("spread", spread, allow_zero=True, scalar=True)
    noise = check_positive("noise", noise, allow_zero=True, scalar=True)
    centres = torch.randn(n_classes, dim, generator=generator, dtype=dtype)
    centres = radius * centres / centres.norm(dim=-1, keepdim=True)  # (C, d)
    y = torch.randint(n_classes, (n_samples,), generator=generator)
    k = round(in_cluster * n_tokens)
    near = centres[y].unsqueeze(1) + spread * torch.randn(n_samples, k, dim, generator=generator, dtype=dtype)
    far = noise * torch.randn(n_samples, n_tokens - k, dim, generator=generator, dtype=dtype)
    H = torch.cat([near, far], 1)  # (M, N, d)
    order = torch.rand(n_samples, n_tokens, generator=generator).argsort(-1)
    return torch.take_along_dim(H, order.unsqueeze(-1), 1), y


def per_sample_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F*(z_m; H_m, W) for M samples, each with its own tokens: z (M, d), H (M, N, d)  ->  (M,).

    The library's :func:`~energylab.forms.free_energy.softmax_free_energy`, vectorised over samples with ``torch.vmap``.
    """
    check_tensor("H", H, ndim=3)
    if len(H) == 0:  # vmap cannot map over zero samples; (M,) = (0,) values, still in the graph of z and W
        if z.dim() != 2 or len(z) != 0:
            raise ValueError(f"z must have shape (M, d) with M = 0 (H holds no sample), got {tuple(z.shape)}")
        return z.sum(-1) + 0 * W.sum()
    return torch.vmap(softmax_free_energy, in_dims=(0, 0, None, None))(z, H, W, T)


@dataclass
class AlternatingConfig:
    """Algorithm 1 of paper 000, full batch. Defaults: the chapter's digits classifier."""

    epochs: int = 60  # K: each epoch is one forward step on every z and one update of W and E
    eta: float = 0.5  # rate of the forward step z ← z − η∇_z F* (the layer's η)
    lr_W: float = 0.5  # rate of the update of W
    lr_E: float = 0.5  # rate of the update of the readout E
    T: float = 1.0  # temperature of F*
    w_objective: str = "energy"  # "energy": W descends F* only (Algorithm 1 as written); "joint": CE + F*
    seed: int = 0  # initialisation of W (identity + noise) and E (small noise)

    def __post_init__(self):
        check_int("epochs", self.epochs, minimum=0)
        for name in ("eta", "lr_W", "lr_E", "T"):
            check_positive(name, getattr(self, name), scalar=True)
        if self.w_objective not in ("energy", "joint"):
            raise ValueError(f"w_objective must be 'energy' or 'joint', got {self.w_objective!r}")
        check_int("seed", self.seed)


@dataclass
class AlternatingHistory:
    """Per epoch: the two objectives of eq. (6) and the accuracies; the final parameters and states."""

    free_energy: list[float] = field(default_factory=list)  # mean F*(z_m, W) over training samples
    cross_entropy: list[float] = field(default_factory=list)  # mean CE(Eᵀ z_m, y_m)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    W: torch.Tensor | None = None
    E: torch.Tensor | None = None


def alternating_optimisation(H: torch.Tensor, y: torch.Tensor, H_test: torch.Tensor, y_test: torch.Tensor,
                             n_classes: int, config: AlternatingConfig = AlternatingConfig()) -> AlternatingHistory:
    """Algorithm 1 (paper 000, Sec. 2.2): alternate a descent step on each z (forward) with steps on W and E.

    H: (M, N, d) training token sets, y: (M,) labels; H_test, y_test likewise. Every sample keeps its state z_m
    across epochs (z_m⁰ = mean token); test samples take the same forward steps with the same W but never update W or E.
    ``w_objective="joint"`` differentiates CE through the current forward step (backprop through one layer).
    """
    check_tensor("H", H, ndim=3)
    check_tensor("H_test", H_test, ndim=3)
    n_classes = check_int("n_classes", n_classes, minimum=1)
    check_labels("y", y, n_classes, length=len(H))
    check_labels("y_test", y_test, n_classes, length=len(H_test))
    if H_test.shape[-1] != H.shape[-1]:
        raise ValueError(f"H_test: last dimension must be {H.shape[-1]} (H's), got {H_test.shape[-1]}")
    check_same_dtype(("H", H), ("H_test", H_test))
    check_instance("config", config, AlternatingConfig)
    config.__post_init__()  # fields may have been changed after construction
    g = torch.Generator().manual_seed(config.seed)
    d, dtype = H.shape[-1], H.dtype
    W = (torch.eye(d, dtype=dtype) + 0.1 * torch.randn(d, d, generator=g, dtype=dtype)).requires_grad_(True)
    E = (0.01 * torch.randn(d, n_classes, generator=g, dtype=dtype)).requires_grad_(True)
    z, z_test = H.mean(1), H_test.mean(1)  # z_m⁰: the mean of the sample's tokens (a mean-pooled [CLS])
    hist = AlternatingHistory()

    def forward_step(z_k, tokens, keep_graph):  # z^{k+1} = z^k − η ∇_z F*(z^k, W)  (= one attention layer)
        z_k = z_k.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(per_sample_free_energy(z_k, tokens, W, config.T).sum(), z_k,
                                      create_graph=keep_graph)
        return z_k - config.eta * grad

    for _ in range(config.epochs):
        z_new = forward_step(z, H, keep_graph=config.w_objective == "joint")
        z_test = forward_step(z_test, H_test, keep_graph=False).detach()
        F = per_sample_free_energy(z_new if config.w_objective == "joint" else z_new.detach(), H, W, config.T).mean()
        ce = torch.nn.functional.cross_entropy(z_new.detach() @ E, y)  # CE(Eᵀz, y), eq. (5)
        w_loss = F + (torch.nn.functional.cross_entropy(z_new @ E.detach(), y) if config.w_objective == "joint" else 0)
        gW, = torch.autograd.grad(w_loss, W)
        gE, = torch.autograd.grad(ce, E)
        with torch.no_grad():
            W -= config.lr_W * gW
            E -= config.lr_E * gE
            z = z_new.detach()
            hist.free_energy.append(float(F))
            hist.cross_entropy.append(float(ce))
            hist.train_accuracy.append(float(((z @ E).argmax(-1) == y).double().mean()))
            hist.test_accuracy.append(float(((z_test @ E).argmax(-1) == y_test).double().mean()))
    hist.W, hist.E = W.detach(), E.detach()
    return hist


# ----------------------------------------------------------------------------- the experiment
@dataclass
class Config:
    n_train: int = 400  # training samples (sets of tokens)
    n_test: int = 200  # test samples: the same forward steps with the trained W, never used to update W or E
    n_tokens: int = 16  # N tokens per sample
    dim: int = 8  # d
    n_classes: int = 4  # C centres
    epochs: int = 60  # K
    eta: float = 1.0  # rate of the forward step on z
    rates_W: tuple[float, ...] = (0.05, 0.5, 1.0)  # one classifier per rate on W (1.0 = eta: Algorithm 1 as written)
    lr_E: float = 1.0  # rate on the readout E
    T: float = 1.0  # temperature of F*
    w_objective: str = "energy"  # "energy": W descends F* only, as written; "joint": CE + F*
    seed: int = 0  # the data and the initialisation of W and E
    device: str = "cpu"  # it runs on the CPU whatever is asked: full batch in float64, and tiny
    progress: bool = False  # unused: each rate takes seconds


PROFILES = {"quick": Config(), "full": Config(n_train=4000, n_test=2000, epochs=300)}
COST = {"quick": "about 3 s on one CPU thread (3 rates x 60 epochs on 400 samples)",
        "full": "about 20 s on one CPU thread (3 rates x 300 epochs on 4,000 samples; it stays on the CPU)"}


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Algorithm 1 at every rate of ``config.rates_W`` on one draw of the task; per-epoch curves as histories
    ``"lr_W=<rate>"`` (steps = epochs 1..K), and ``final["lr_W=<rate>/<metric>"]`` after the last epoch."""
    if not config.rates_W:
        raise ValueError("rates_W must name at least one rate on W")
    gen = torch.Generator().manual_seed(config.seed)
    H, y = cluster_task(config.n_train + config.n_test, config.n_tokens, config.dim, config.n_classes, generator=gen)
    split = (H[:config.n_train], y[:config.n_train], H[config.n_train:], y[config.n_train:], config.n_classes)
    results = Results("alternating", dataclasses.asdict(config))
    identity = {"experiment": "alternating", "config": config_record(config)}
    for rate in config.rates_W:
        name = f"lr_W={rate:g}"
        folder = None if out_dir is None else os.path.join(out_dir, name)
        if folder is not None and claim_run_dir(folder, resume):  # this rate finished in an earlier call
            history = History.from_dict(load_checkpoint(folder, identity)["history"])
        else:
            cfg = AlternatingConfig(epochs=config.epochs, eta=config.eta, lr_W=rate, lr_E=config.lr_E, T=config.T,
                                    w_objective=config.w_objective, seed=config.seed)
            h = alternating_optimisation(*split, cfg)
            history = History()
            for k in range(config.epochs):
                history.log(k + 1, {m: getattr(h, m)[k] for m in ("free_energy", "cross_entropy", "train_accuracy",
                                                                  "test_accuracy")})
            history.log(config.epochs, {"W_norm": float(h.W.norm())})
            if folder is not None:
                save_checkpoint(folder, {"step": config.epochs, "identity": identity, "history": history.to_dict()})
        results.histories[name] = history
        results.final.update({f"{name}/{m}": history.last(m) for m in history.curves})
    results.extra["floor"] = -config.T * math.log(config.n_tokens)  # min over W of F*: −T log N
    results.extra["chance_cross_entropy"] = math.log(config.n_classes)
    return results
