"""In-context denoising on spheres (Smart, Bietti and Sengupta, ICML 2025): one trained Hopfield attention layer per
map (softmax, sparsemax, 1.5-entmax) beside the Bayes-optimal answer and the no-learning baselines (chapter 12).

Data: :func:`energylab.tasks.denoising.sphere_prompts`. Model: :class:`energylab.layers.sparse_hopfield.
HopfieldAttention`, the noisy token as the query and the context as the memories, trained on the squared error
‖f − x‖² (summed over the n coordinates; the paper's code averages over them, a factor n). Per context length L
and map, one model per seed; every score is on the same test prompts as the baselines:

- ``bayes``: the posterior mean knowing the prompt's subspace, R and σ² (the best any estimator can do);
- ``one step (softmax)``: the empirical Bayes estimator, one Hopfield step at β = 1/σ² with the context as the
  patterns (no learning); ``one step (sparsemax)``, ``one step (1.5-entmax)``: the same step with the sparse maps;
- ``nearest token``: the context token closest to the query (what exact retrieval of one memory gives);
- ``noisy query`` (the input itself) and ``zero`` (the prior mean; input-blind).

Beside them, ``fitted one step (softmax)``: the layer restricted to scaled identities, W_KQ = βI and W_PV = αI, with
(β, α) fitted on the training prompts (β on a grid, α in closed form): two parameters, where the trained layer has
2n². Not the paper's: one learning-rate step (theirs: ×0.1 at 80% and again at 90% of training), our
initialisation (N(0, 0.01²) weights), and the sparse maps.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from energylab._setup import choose_device
from energylab.engine.batches import EpochOrder
from energylab.engine.results import Results
from energylab.engine.runs import config_record
from energylab.engine.train import TrainConfig, train
from energylab.forms.sparse_hopfield import regulariser
from energylab.layers.sparse_hopfield import HopfieldAttention
from energylab.tasks.denoising import sphere_posterior_mean, sphere_prompts, squared_error

KINDS = ("softmax", "sparsemax", "entmax15")  # the maps the chapter trains (regulariser kinds of sparse_hopfield)
BASELINES = ("zero", "noisy query", "nearest token", "one step (softmax)", "one step (sparsemax)",
             "one step (1.5-entmax)", "fitted one step (softmax)", "bayes")
REFERENCES = ("bayes", "one step (softmax)")  # every score also as a paired difference to these, per prompt
BETA_GRID = tuple(round(0.5 * 1.1 ** k, 4) for k in range(50))  # 0.5 ... 53: the β tried by the two-parameter fit


@dataclass
class Config:
    n: int = 16  # ambient dimension (Smart et al.: 16)
    d: int = 8  # dimension of each prompt's subspace (8)
    contexts: tuple[int, ...] = (500,)  # context lengths L, one set of models each (500)
    sigma2: float = 0.1  # noise variance σ² of the query (0.1)
    radius: float = 1.0  # radius R of the sphere (1)
    kinds: tuple[str, ...] = KINDS  # the maps, one layer each
    n_train: int = 800  # training prompts (800 of their 1,000)
    n_test: int = 200  # test prompts (200)
    epochs: int = 100  # passes over the training prompts (100)
    batch_size: int = 80  # prompts per step (80)
    lr: float = 0.01  # Adam's learning rate (0.01), ×0.1 after 80% of the steps (theirs: also ×0.1 at 90%)
    seeds: tuple[int, ...] = (0, 1, 2)  # one model per seed and map (their ensembles: 6)
    data_seed: int = 0  # seed of the prompts (train and test drawn from one stream)
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = True  # progress bars


CHAPTER = "12_sparse_hopfield"  # the chapter that trains it: notebooks/12_sparse_hopfield.ipynb
PROFILES = {
    # the paper's sphere task at L = 500, three seeds per map (8-16 s per model on one CPU thread)
    "quick": Config(),
    # the same at six context lengths and six seeds (Fig. 4a's question on the sphere task: does the trained layer
    # approach the Bayes-optimal error as the context grows?), 1,000 test prompts
    "medium": Config(contexts=(20, 50, 100, 200, 500, 1000), seeds=(0, 1, 2, 3, 4, 5), n_test=1000),
    # the same on a GPU, ten seeds and longer contexts
    "full": Config(contexts=(20, 50, 100, 200, 500, 1000, 2000, 4000), seeds=tuple(range(10)), n_test=1000,
                   n_train=8000),
}
COST = {
    "quick": "about 2.5 min on one CPU thread with the book's pinned numerics (measured 143 s on an Intel Xeon: 3 maps "
             "x 3 seeds x 1,000 steps of 80 prompts, L = 500, n = 16; 74 s with the processor's own kernels)",
    "medium": "about 20 min of one CPU thread with pinned numerics (measured 21 min on an Intel Xeon shared with other "
              "jobs: 6 context lengths x 3 maps x 6 seeds x 1,000 steps); committed as results/denoising/medium.json",
    "full": "8 context lengths x 3 maps x 10 seeds x 10,000 steps: under an hour on one GPU (estimate, not run)",
}


def softmax_step(prompts, beta: float) -> torch.Tensor:
    """X softmax(β X x̃) for every prompt: one Hopfield step from the noisy token, the context as patterns."""
    X, q = prompts.context.double(), prompts.query.double()
    return torch.einsum("bl,bln->bn", torch.softmax(beta * torch.einsum("bln,bn->bl", X, q), -1), X)


def fit_scaled_step(prompts) -> tuple[float, float]:
    """(β, α) minimising the mean of ‖α X softmax(β X x̃) − x‖² over ``prompts``: β on :data:`BETA_GRID`, α in
    closed form for each β (α = Σ⟨m, x⟩ / Σ⟨m, m⟩ with m the one-step output)."""
    best = None
    x = prompts.target.double()
    for beta in BETA_GRID:
        m = softmax_step(prompts, beta)
        alpha = float((m * x).sum() / (m * m).sum())
        mse = float(squared_error(alpha * m, x).mean())
        if best is None or mse < best[0]:
            best = (mse, beta, alpha)
    return best[1], best[2]


def baselines(prompts, config: Config, fitted: tuple[float, float] | None = None) -> dict[str, torch.Tensor]:
    """Every estimate of the clean token that trains no layer, per prompt: name -> (B, n) (module docstring);
    ``fitted`` is (β, α) of the two-parameter fit (left out when None)."""
    X, q = prompts.context.double(), prompts.query.double()
    beta = 1.0 / config.sigma2
    scores = torch.einsum("bln,bn->bl", X, q)
    out = {"zero": torch.zeros_like(q), "noisy query": q,
           "nearest token": X[torch.arange(len(q)), scores.argmax(-1)]}
    for kind, label in (("softmax", "softmax"), ("sparsemax", "sparsemax"), ("entmax15", "1.5-entmax")):
        p = regulariser(kind).prediction(beta * scores)
        out[f"one step ({label})"] = torch.einsum("bl,bln->bn", p, X)
    if fitted is not None:
        out["fitted one step (softmax)"] = fitted[1] * softmax_step(prompts, fitted[0])
    out["bayes"] = sphere_posterior_mean(q, prompts.basis.double(), config.radius, config.sigma2)
    return out


def _split(prompts, start: int, stop: int):
    return type(prompts)(*(t[start:stop] for t in prompts))


def _train_one(config: Config, kind: str, seed: int, data, device, out_dir, resume) -> tuple[HopfieldAttention, dict]:
    model = HopfieldAttention(config.n, kind, dtype=torch.float32, generator=torch.Generator().manual_seed(seed))
    order = EpochOrder(config.n_train, config.batch_size)

    def batches(step):
        idx = order(step, seed)
        return data.context[idx], data.query[idx], data.target[idx]

    def loss_fn(m, batch):
        context, query, target = batch
        return squared_error(m(query, context), target).mean(), {}

    steps = config.epochs * order.steps_per_epoch
    history = train(model, loss_fn, batches,
                    TrainConfig(steps=steps, optimizer="adamw", lr=config.lr, schedule="step", lr_step=int(0.8 * steps),
                                lr_gamma=0.1, seed=seed, device=str(device), progress=config.progress,
                                log_every=order.steps_per_epoch),
                    out_dir=out_dir, resume=resume,
                    identity={"experiment": "denoising", "config": config_record(config), "kind": kind, "seed": seed})
    return model, history


def _score(estimate: torch.Tensor, prompts, references: dict[str, torch.Tensor]) -> dict[str, float]:
    """The mean squared error over the prompts and its standard error (sample standard deviation / √B), and for each
    reference estimate the mean and standard error of the per-prompt difference (paired: the same prompts)."""
    e = squared_error(estimate.double(), prompts.target.double())
    row = {"mse": float(e.mean()), "se": float(e.std() / len(e) ** 0.5)}
    for name, ref in references.items():
        diff = e - squared_error(ref.double(), prompts.target.double())
        row[f"minus {name}"], row[f"minus {name} se"] = float(diff.mean()), float(diff.std() / len(e) ** 0.5)
    return row


def _weights_summary(model: HopfieldAttention) -> dict[str, float]:
    """How close the trained maps are to scaled identities: the means of their diagonals and the RMS of the rest."""
    out = {}
    for name in ("W_KQ", "W_PV"):
        W = getattr(model, name).detach().double().cpu()
        off = W - torch.diag(W.diagonal())
        out[f"{name} diagonal"] = float(W.diagonal().mean())
        out[f"{name} off-diagonal rms"] = float(off.pow(2).sum() / (W.numel() - len(W))) ** 0.5
    return out


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train one layer per (L, map, seed); score it and the baselines on the same test prompts.

    ``tables["scores"]``: one row per (L, estimator, seed) with the mean squared error over the test prompts and its
    standard error, and its paired differences to the :data:`REFERENCES` ("minus bayes", "minus bayes se", ...)
    (baselines once per L, seed None); ``tables["weights"]``: per trained model the diagonals of W_KQ
    and W_PV and the RMS of their off-diagonal entries; ``final["<L>/<estimator>"]``: the mean over seeds; histories
    ``"L<L>/<kind>/seed<s>"`` (the training loss per epoch)."""
    device = choose_device(config.device)
    results = Results("denoising", config_record(config))
    scores, weights = [], []
    for L in config.contexts:
        g = torch.Generator().manual_seed(config.data_seed * 1_000_003 + L)
        prompts = sphere_prompts(config.n_train + config.n_test, config.n, config.d, L, config.sigma2,
                                 config.radius, generator=g)
        train_set, test_set = _split(prompts, 0, config.n_train), _split(prompts, config.n_train, len(prompts.query))
        fitted = fit_scaled_step(train_set)
        results.extra.setdefault("fitted", {})[str(L)] = {"beta": fitted[0], "alpha": fitted[1]}
        estimates = baselines(test_set, config, fitted)
        references = {name: estimates[name] for name in REFERENCES}
        for name, estimate in estimates.items():
            scores.append({"context": L, "estimator": name, "seed": None, **_score(estimate, test_set, references)})
            results.final[f"{L}/{name}"] = scores[-1]["mse"]
        for kind in config.kinds:
            per_seed = []
            for seed in config.seeds:
                folder = None if out_dir is None else os.path.join(out_dir, f"L{L}-{kind}-seed{seed}")
                model, history = _train_one(config, kind, seed, train_set, device, folder, resume)
                results.histories[f"L{L}/{kind}/seed{seed}"] = history
                with torch.no_grad():
                    f = model.cpu()(test_set.query, test_set.context)
                scores.append({"context": L, "estimator": f"trained ({kind})", "seed": seed,
                               **_score(f, test_set, references)})
                per_seed.append(scores[-1]["mse"])
                weights.append({"context": L, "kind": kind, "seed": seed, **_weights_summary(model)})
            results.final[f"{L}/trained ({kind})"] = sum(per_seed) / len(per_seed)
    results.tables["scores"], results.tables["weights"] = scores, weights
    results.extra["noise_floor"] = config.n * config.sigma2  # the noisy query's expected error, n σ²
    results.extra["beta_one_step"] = 1.0 / config.sigma2
    return results



def summary(results: Results, context: int, estimator: str) -> dict:
    """A baseline's row, or a trained map's rows merged: the seeds' mean of each number, and the largest of their
    standard errors (each seed is scored on the same prompts)."""
    rows = [r for r in results.tables["scores"] if r["context"] == context and r["estimator"] == estimator]
    if not rows:
        raise KeyError(f"no scores for {estimator!r} at L = {context}")
    def is_se(key: str) -> bool:
        return key == "se" or key.endswith(" se")

    return {k: (max if is_se(k) else lambda v: sum(v) / len(v))([r[k] for r in rows])
            for k in rows[0] if k not in ("context", "estimator", "seed")}
