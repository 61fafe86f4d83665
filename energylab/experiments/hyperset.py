"""Hyper-SET on images: the looped Hyper-SET layer vs the looped Transformer, and the ablations (paper 004).

Each name in ``layers`` trains one :class:`energylab.models.hyperset.HyperSET` classifier (patch embedding, CLS
token, one shared layer iterated ``iterations`` times, readout on the CLS token) with cross-entropy, then is tested
at every T in ``test_iterations``. "transformer" is the looped baseline; "hyperset" is the paper's layer and
"hyperset-<variant>" its alternatives (Table 3: "sigmoid", "linear" attention, "softmaxff", "gatedff" feedforward,
"fixed0.1", "fixed0.5" step sizes; Table 4: "lora<r>" depth-wise LoRA). Hyper-SET uses ``ffn_mult_hyperset``
hidden units per channel (M = d in the paper's image models, which gives its 0.96 M vs 1.79 M parameters) and the
Transformer ``ffn_mult``.

Data: ``"digits"`` (scikit-learn's 1,797 8×8 digits, bundled, no download; 2×2 patches: 16 tokens + CLS) for quick
runs, ``"cifar10"`` / ``"cifar100"`` through torchvision (needs a download; 4×4 patches: 64 tokens + CLS) for full.

Results: ``tables["accuracy"]`` one row per (layer, T) with test accuracy and the parameter count (all trainable
scalars of the classifier: embedding, positions, CLS, layer, step-size network, readout); ``final["<layer>@T<t>"]``;
``extra["metrics"][layer]`` the per-iteration test means of E_ATTN, E_FF (after normalisation), effective rank and
average angles (paper's and code's) of each Hyper-SET model up to max(test_iterations); ``extra["states"][layer]``
one test image's tokens in head 0's subspace, on the unit sphere, at t = 0..T' (nested lists) for the sphere viewer.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from energylab._checks import check_count, check_int, check_labels, check_tensor
from energylab._setup import choose_device
from energylab.baselines import constant_accuracy
from energylab.engine.batches import EpochOrder
from energylab.engine.results import seed_spread
from energylab.engine.runs import config_record
from energylab.engine.train import Results, TrainConfig, train
from energylab.engine.verdicts import compare, scaling, trend
from energylab.models import count_parameters
from energylab.models.hyperset import HyperSET

CHAPTER = "08_hyperset"  # the chapter that trains it: notebooks/08_hyperset.ipynb


@dataclass
class Config:
    dataset: str = "digits"  # "digits" (bundled with scikit-learn), "cifar10" or "cifar100" (torchvision download)
    data_dir: str = "data"  # where torchvision stores CIFAR
    n_train: int = 1297  # training images (digits: the rest of the 1,797 are the test set)
    n_test: int = 500  # test images
    layers: tuple[str, ...] = ("hyperset", "transformer")  # one model per name, trained one after the other
    dim: int = 32  # width d (the paper's Small: 384)
    heads: int = 4  # attention heads H
    ffn_mult: int = 4  # Transformer feed-forward width / d (the paper: 4)
    ffn_mult_hyperset: int = 1  # Hyper-SET dictionary size M / d (the paper's image models: M = d)
    iterations: int = 4  # T during training (the paper: 12)
    test_iterations: tuple[int, ...] = (4, 8)  # T at test time (T and 2T)
    epochs: int = 12  # passes over the training images
    batch_size: int = 64  # images per step (the paper: 128)
    lr: float = 3e-3  # Adam(W) peak learning rate (the paper: 1e-3 at batch 128 for 200 epochs)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    warmup_steps: int = 20  # linear warm-up, then cosine to 0
    grad_clip: float | None = 1.0  # max gradient norm
    seeds: tuple[int, ...] = (0,)  # one model per layer and seed (initialisation, batch order); seed means
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = True  # progress bars


_ABLATION = ("hyperset", "hyperset-sigmoid", "hyperset-linear", "hyperset-softmaxff", "hyperset-gatedff",
             "hyperset-fixed0.1", "hyperset-fixed0.5", "hyperset-lora4")
PROFILES = {
    # digits, d = 32, T = 4, 12 epochs of 20 steps, Hyper-SET and the Transformer
    "quick": Config(),
    # the Table 3 / Table 4 rows on the same quick task: one model per variant (the Transformer is in quick)
    "ablation": Config(layers=_ABLATION),
    # digits at a larger scale: d = 64, T = 8, 25 epochs (500 steps), the Transformer, the ablation set and the
    # LoRA ranks of Table 4; sized to fit about 15 min of one CPU core (measured: about 80 s per Hyper-SET model)
    "medium": Config(layers=("transformer",) + _ABLATION[:-1] + ("hyperset-lora2", "hyperset-lora4", "hyperset-lora8"),
                     dim=64, iterations=8, test_iterations=(8, 16), epochs=25, lr=2e-3, seeds=(0, 1, 2)),
    # Tables 8/9's Small recipe (paper 004) where the harness can: d = 384, 6 heads, M = d, 12 iterations, 200 epochs,
    # batch 128, lr 1e-3 cosine, 5 warm-up epochs (5 x 390 steps), weight decay 5e-5, step sizes on x_t. Differs:
    # AdamW (decoupled decay) not Adam, cosine floor 0 not 1e-5, learned not sinusoidal positions, 4x4 not 8x8
    # patches, time embedding width d not 512 (chapter 8, section 8.9)
    "full": Config(dataset="cifar10", n_train=50000, n_test=10000, dim=384, heads=6, iterations=12,
                   test_iterations=(12, 24), epochs=200, batch_size=128, lr=1e-3, weight_decay=5e-5,
                   warmup_steps=1950),
}
COST = {
    "quick": "about 20 s on one CPU thread (2 models x 240 steps; measured 17 s of CPU time)",
    "ablation": "about 70 s on one CPU thread (8 models x 240 steps at about 8.5 s each; estimate from quick)",
    "medium": "24 min on one CPU thread (measured 23.6 min: 11 models x 3 seeds x 500 steps at d = 64, T = 8); "
              "committed as results/hyperset/medium.json",
    "full": "paper 004's Small recipe (Tables 8/9, with the differences listed in chapter 8) on CIFAR-10: 2 models x "
            "78,000 steps at d = 384, T = 12: GPU hours (estimate)",
}


def patches(images: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, (H/p)(W/p), C p²): non-overlapping p × p patches in row-major order."""
    check_tensor("images", images, 4, layout="(B, C, H, W)")
    patch = check_int("patch", patch, minimum=1)
    if images.shape[2] % patch or images.shape[3] % patch:
        raise ValueError(f"patch={patch} must divide the image height and width, got images of shape "
                         f"{tuple(images.shape)}")
    B, C, H, W = images.shape
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B, C, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, (H // patch) * (W // patch), C * patch * patch)


def load_images(config: Config) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor], int]:
    """((train patches, labels), (test patches, labels), classes); a seeded split for digits."""
    if config.dataset == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (1797, 1, 8, 8) in [0, 1]
        y = torch.tensor(d.target, dtype=torch.long)
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        check_int("n_train", config.n_train, minimum=1)  # 0 or -5 gave an empty or a 1,792-image training set
        check_int("n_test", config.n_test, minimum=1)
        if config.n_train + config.n_test > len(y):
            raise ValueError(f"digits has {len(y)} images, asked for {config.n_train} + {config.n_test}")
        tr, te = perm[:config.n_train], perm[len(y) - config.n_test:]
        x = patches(x - 0.5, 2)
        return (x[tr], y[tr]), (x[te], y[te]), 10
    if config.dataset in ("cifar10", "cifar100"):
        import torchvision

        cls = torchvision.datasets.CIFAR10 if config.dataset == "cifar10" else torchvision.datasets.CIFAR100
        out = []
        for train_split, n in ((True, check_int("n_train", config.n_train, minimum=1)),
                               (False, check_int("n_test", config.n_test, minimum=1))):
            ds = cls(config.data_dir, train=train_split, download=True)
            x = torch.tensor(ds.data[:n], dtype=torch.float32).permute(0, 3, 1, 2) / 255.0  # (n, 3, 32, 32)
            out.append((patches((x - 0.5) / 0.25, 4), torch.tensor(ds.targets[:n], dtype=torch.long)))
        return out[0], out[1], 10 if config.dataset == "cifar10" else 100
    raise ValueError(f"unknown dataset {config.dataset!r}: use 'digits', 'cifar10' or 'cifar100'")


def make_model(config: Config, layer: str, patch_dim: int, n_patches: int, classes: int) -> HyperSET:
    mult = config.ffn_mult_hyperset if isinstance(layer, str) and layer.startswith("hyperset") else config.ffn_mult
    return HyperSET(patch_dim, n_patches, classes, dim=config.dim, heads=config.heads, ffn_mult=mult,
                    iterations=config.iterations, layer=layer)


def loss_fn(model, batch):
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits, y), {"acc": (logits.argmax(-1) == y).float().mean()}


@torch.no_grad()
def accuracy(model: HyperSET, x: torch.Tensor, y: torch.Tensor, iterations) -> dict[int, float]:
    """{T: test accuracy} for every T in ``iterations`` (ints >= 1), read out after each T of one pass; x (B, N, p)
    patches with B >= 1, y (B,) their class indices."""
    wanted = _iteration_counts(iterations)
    model.inputs(x[:0] if isinstance(x, torch.Tensor) else x)  # the patches' type and shape, before their count
    check_count("x", x, 0, what="image", why="an accuracy over no images is NaN")
    check_labels("y", y, model.head.out_features, length=len(x))
    device = next(model.parameters()).device
    out = {}
    for t, state in model.states(x.to(device), max(wanted)):
        if t in wanted:
            out[t] = float((model.readout(state).argmax(-1).cpu() == y).float().mean())
    return out


def _iteration_counts(iterations) -> set[int]:
    """The set of T's asked for: a non-empty collection of ints >= 1 (0, -1 or 1.5 were skipped without a word, an
    empty one was a raw max() error)."""
    if isinstance(iterations, (str, bytes)) or not hasattr(iterations, "__iter__"):
        raise TypeError(f"iterations must be a collection of ints >= 1, e.g. (4, 8), got {iterations!r}")
    wanted = {check_int("iterations[]", t, minimum=1) for t in iterations}
    if not wanted:
        raise ValueError("iterations must hold at least one iteration count, got none")
    return wanted


def _check_hyperset(model, hook: str) -> None:
    """The model's looped layer must be a Hyper-SET layer (it has the ``hook``; the Transformer has none)."""
    if not hasattr(getattr(model, "layer", None), hook):
        raise TypeError(f"model must be a HyperSET classifier with a Hyper-SET layer (one of the 'hyperset' layers, "
                        f"which have .{hook}), got layer {type(getattr(model, 'layer', model)).__name__}")


@torch.no_grad()
def iteration_metrics(model: HyperSET, x: torch.Tensor, iterations: int) -> dict[str, list]:
    """Per-iteration test means (t = 0..iterations, t = 0 is x_0) of the layer's metrics (Hyper-SET only); x (B, N, p)
    patches with B >= 1."""
    _check_hyperset(model, "metrics")
    x0 = model.inputs(x)
    check_count("x", x, 0, what="image", why="a mean over no images is NaN")
    xs = [x0] + [s for _, s in model.states(x, iterations)]  # one pass, t = 0..iterations
    rows = [model.layer.metrics(s, max(t, 1)) for t, s in enumerate(xs)]
    out = {k: [round(float(r[k].mean()), 6) for r in rows] for k in rows[0]}
    out["attention_mid"] = [out["attention"][0]] + [round(float(e.mean()), 6)
                                                    for e in model.layer.attention_after_halves(xs, x0)]
    return out


@torch.no_grad()
def head_trajectory(model: HyperSET, x: torch.Tensor, iterations: int, head: int = 0) -> list:
    """One image's tokens in one head's subspace, RMS-normalised and scaled to unit length, at t = 0..iterations:
    nested lists (T' + 1, N, d_h), rounded to 4 decimals (for the sphere viewer). The image is x[0] (x: (B, N, p),
    B >= 1); head in 0..H-1."""
    _check_hyperset(model, "normalised")
    head = check_int("head", head, minimum=0)
    if head >= model.layer.heads:
        raise ValueError(f"head must lie in 0..{model.layer.heads - 1} (the layer has {model.layer.heads} heads), "
                         f"got {head}")
    x0 = model.inputs(x)
    check_count("x", x, 0, what="image")
    xs = [x0] + [s for _, s in model.states(x, iterations)]
    z = torch.stack([model.layer.normalised(s, t or 1)[0][0, head] for t, s in enumerate(xs)])
    z = z / z.norm(dim=-1, keepdim=True)
    return z.double().mul(1e4).round().div(1e4).tolist()


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train one classifier per name in ``layers``; test at every T in ``test_iterations``."""
    if not config.layers or not config.test_iterations or min(config.test_iterations) < 1:
        raise ValueError("need at least one layer and positive test_iterations")
    device = choose_device(config.device)
    (x_tr, y_tr), (x_te, y_te), classes = load_images(config)
    order = EpochOrder(len(y_tr), config.batch_size)
    per_epoch = order.steps_per_epoch
    results = Results("hyperset", dataclasses.asdict(config))
    rows, params, metrics, states = [], {}, {}, {}
    seeds = config.seeds
    for layer in config.layers:
        traces = []
        for seed in seeds:
            torch.manual_seed(seed)
            model = make_model(config, layer, x_tr.shape[-1], x_tr.shape[1], classes)
            params[layer] = count_parameters(model)

            def batches(step: int, seed=seed):
                idx = order(step, seed)
                return x_tr[idx], y_tr[idx]

            train_cfg = TrainConfig(steps=config.epochs * per_epoch, optimizer="adamw", lr=config.lr,
                                    weight_decay=config.weight_decay, schedule="cosine",
                                    warmup_steps=config.warmup_steps, grad_clip=config.grad_clip,
                                    log_every=max(1, per_epoch), device=str(device), seed=seed,
                                    progress=config.progress)
            per_seed = len(seeds) > 1  # one seed: the layer's name alone, as the quick profile's curves are named
            folder = os.path.join(layer, f"seed{seed}") if per_seed else layer
            key = f"{layer}/seed{seed}" if per_seed else layer
            results.histories[key] = train(model, loss_fn, batches, train_cfg,
                                           out_dir=None if out_dir is None else os.path.join(out_dir, folder),
                                           resume=resume, identity=config_record(config))
            model.eval()
            accs = accuracy(model.cpu(), x_te, y_te, config.test_iterations)
            for t in sorted(accs):
                rows.append({"layer": layer, "seed": seed, "iterations": t, "trained_iterations": config.iterations,
                             "accuracy": accs[t], "parameters": params[layer]})
            if layer.startswith("hyperset"):
                traces.append(iteration_metrics(model, x_te, max(config.test_iterations)))
                if seed == seeds[0]:
                    states[layer] = head_trajectory(model, x_te[:1], max(config.test_iterations))
        for t in sorted(set(config.test_iterations)):  # seed means (and their spread, over >= 2 seeds)
            got = [r["accuracy"] for r in rows if r["layer"] == layer and r["iterations"] == t]
            results.final[f"{layer}@T{t}"], std = seed_spread(got)
            if len(got) > 1:
                results.final[f"{layer}@T{t}/std"] = std
        if traces:
            metrics[layer] = {k: [round(sum(tr[k][i] for tr in traces) / len(traces), 6)
                                  for i in range(len(traces[0][k]))] for k in traces[0]}
            if len(traces) > 1:
                metrics[layer]["per_seed"] = traces
    results.tables["accuracy"] = rows
    results.extra.update(parameters=params, metrics=metrics, states=states, device=str(device),
                         baseline=constant_accuracy(y_tr, y_te),  # input-blind: the most frequent training class
                         steps=config.epochs * per_epoch, classes=classes, tokens=x_tr.shape[1] + 1)
    return results


def seed_accuracies(results: Results, layer: str, iterations: int) -> list[float]:
    """Test accuracy of each seed of ``layer`` at T = ``iterations`` (``tables["accuracy"]`` rows)."""
    if "accuracy" not in results.tables:
        raise ValueError(f"results has no 'accuracy' table (a Hyper-SET run's); its tables: {sorted(results.tables)}")
    return [r["accuracy"] for r in results.tables["accuracy"] if r["layer"] == layer and r["iterations"] == iterations]


def verdicts(results: Results) -> dict[str, str]:
    """What a multi-seed run says, each from the per-seed numbers (:mod:`energylab.engine.verdicts`): every variant
    against "hyperset" at T, every model from T to 2T, and for each Hyper-SET variant
    the direction of E_ATTN, E_FF, the effective rank and the paper's average angle along the trained iterations
    t = 1..T in every seed ("falls" / "rises" only if all seeds agree)."""
    cfg = results.config
    T, T2 = cfg["test_iterations"][0], cfg["test_iterations"][-1]
    out = {}
    for layer in cfg["layers"]:
        if layer != "hyperset":
            out[f"{layer} vs hyperset @T"] = compare(seed_accuracies(results, layer, T),
                                                     seed_accuracies(results, "hyperset", T))
        out[f"{layer}, T -> 2T"] = scaling(seed_accuracies(results, layer, T), seed_accuracies(results, layer, T2))
    for layer, m in results.extra.get("metrics", {}).items():
        seeds = m.get("per_seed", [m])
        for key in ("attention", "feedforward", "effective_rank", "average_angle"):
            got = {trend(s[key][1:cfg["iterations"] + 1]) for s in seeds}
            out[f"{layer}: {key} along t = 1..T"] = got.pop() if len(got) == 1 else "mixed"
    return out
