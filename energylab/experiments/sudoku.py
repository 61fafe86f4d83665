"""Looped reasoning on Sudoku: one shared layer iterated T times, tested at other T (papers 003 and 004).

A :class:`~energylab.models.looped.LoopedModel` (embedding with learnable positions, one shared layer from
``energylab.models.looped.LAYERS`` iterated ``iterations`` times, readout) is trained with cross-entropy on the
blanks only, then evaluated on an in-distribution and harder out-of-distribution sets at every T in
``test_iterations`` (test-time scaling: does running the loop longer than it was trained help?).

Data (``energylab.tasks.sudoku``): a set is a name in ``NAMED_SETS`` (generated and cached: ``"4x4-id"``,
``"4x4-ood"``, ``"6x6-id"``, ``"6x6-ood"``, ``"satnet-like"``, ``"rrn-like"``, ``"rrn-17"``), or the public
files as ``"satnet:<dir>"`` / ``"rrn:<dir>"`` (RRN: the seeded random subset of ``load_rrn``, as Hyper-SET's
code takes). Our machines cannot download the public files, so the profiles use generated sets.

Results: ``tables["test_time"]`` has one row per (seed, set, T in ``test_iterations``) with board and cell
accuracy (blanks only); ``extra["test_time"][set]`` holds the seed-mean curves ``{"iterations", "board",
"cell"}`` at every T from 1 to max(test_iterations) (one pass reads out after each iteration) for plots;
``histories["seed<s>"]`` the training curves; ``final["<set>/board@T<t>"]`` the headline numbers.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from energylab._setup import choose_device
from energylab.batches import EpochOrder
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.models.regularisers import REGULARISERS, regulariser
from energylab.runs import config_record
from energylab.tasks import sudoku as tasks
from energylab.tasks.sudoku_config import check_run_config
from energylab.train import History, Results, TrainConfig, train


@dataclass
class Config:
    size: int = 4  # board side: 4 (2×2 boxes), 6 (2×3) or 9 (3×3)
    train_set: str = "4x4-id"  # a NAMED_SETS name, or "satnet:<dir>" / "rrn:<dir>" for the public files
    test_sets: tuple[str, ...] = ("4x4-id", "4x4-ood")  # evaluated at every test T (test split of each)
    n_train: int = 2500  # training boards (the papers: 9,000)
    n_test: int = 500  # test boards per test set (the papers: 1,000)
    layer: str = "transformer"  # the looped layer, a name in energylab.models.looped.LAYERS
    dim: int = 64  # width d
    heads: int = 4  # attention heads H
    ffn_mult: int = 4  # feed-forward width / d
    inject: bool = True  # inject the embedded board c at every iteration
    iterations: int = 8  # T during training
    test_iterations: tuple[int, ...] = (4, 8, 16, 32)  # T at test time (T/2, T, 2T, 4T)
    epochs: int = 30  # passes over the training boards
    batch_size: int = 64  # boards per step
    lr: float = 1e-3  # AdamW peak learning rate
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW moment decay rates
    schedule: str = "cosine"  # "constant" or "cosine" (to 0)
    warmup_steps: int = 50  # linear warm-up steps
    grad_clip: float | None = 1.0  # max gradient norm (004: 1.0)
    eval_every: int = 0  # steps between evaluations on the first test set at the training T (0: at the end)
    n_eval: int = 200  # boards of that evaluation
    seeds: tuple[int, ...] = (0,)  # one model per seed, trained one after the other (003: 5 seeds)
    data_seed: int = 0  # seed of the generated sets (SudokuSetConfig.seed) and of RRN's random subset
    amp: bool = False  # bf16 autocast on CUDA
    checkpoint_every: int = 0  # steps between checkpoints in out_dir (0: only at the end of each seed)
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = True  # progress bars
    regulariser: str = "none"  # "none", "spectral", "e-multi" or "e-single" (energylab.models.regularisers)
    reg_weight: float = 0.0  # weight w of the regulariser: loss = CE + w · R (0: off)
    layers: tuple[str, ...] = ()  # a league: one run of ``layer`` per name here (() = just ``layer``), merged
    layer_lr: tuple[str, ...] = ()  # per-layer learning rates in a league, "name=lr" (others use ``lr``)
    n_trace: int = 200  # boards of the first test set on which a layer's ``metrics`` are traced along t (0: off)


# The learning rate of the quick and league profiles, 3e-3: for each of the four layers the better of 1e-3 and 3e-3
# on the quick 4×4 profile (board accuracy on 4x4-id at T = 8, one seed, 2026-11-25): Transformer 0.97 / 0.994,
# ItrSA 0.940 / 0.992, AKOrN 0.724 / 0.912, Hyper-SET 0.040 / 0.878 (chapter 8, section 8.5)
LEAGUE_LR = 3e-3

PROFILES = {
    # 4×4, d = 64, T = 8: measured 78-93 s on one CPU thread (1,170 steps, data and evaluation included);
    # Transformer 4x4-id 99.4% / 4x4-ood 87.6% boards at T = 8, 99.8% / 92.6% at T = 32
    "quick": Config(lr=LEAGUE_LR),
    # 6×6 (2×3 boxes) for one CPU core: 5,600 steps, measured 16 min; committed (results/sudoku/medium-cpu.json):
    # 6x6-id 87% / 6x6-ood 23% boards at T = 8, 92% / 46% at T = 32
    "medium-cpu": Config(size=6, train_set="6x6-id", test_sets=("6x6-id", "6x6-ood"), n_train=9000, n_test=1000,
                         dim=64, heads=4, iterations=8, epochs=40, batch_size=64, warmup_steps=200, eval_every=500),
    # the league of papers 003/004 at 6×6 on one CPU: the four looped layers, same boards, steps, width and T,
    # 3 seeds each, all at LEAGUE_LR
    "league-6x6": Config(size=6, train_set="6x6-id", test_sets=("6x6-id", "6x6-ood"), n_train=9000, n_test=1000,
                         dim=64, heads=4, iterations=8, epochs=30, batch_size=64, warmup_steps=200, eval_every=500,
                         lr=LEAGUE_LR, seeds=(0, 1, 2), checkpoint_every=500,
                         layers=("transformer", "itrsa", "akorn", "hyperset")),
    # 9×9 on one CPU core (issue 27, item 3), the one configuration tried: d = 64, T = 16, batch 32 (0.3-0.4 s/step
    # against 11 s/step for ``medium``); committed (results/sudoku/medium-cpu-9x9.json, 60 min): satnet-like 29% /
    # rrn-like 3% / rrn-17 6% boards at T, 36% / 5% / 10% at 2T
    "medium-cpu-9x9": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"),
                             n_train=9000, n_test=1000, dim=64, heads=4, iterations=16,
                             test_iterations=(8, 16, 32, 64), epochs=32, batch_size=32, lr=LEAGUE_LR,
                             warmup_steps=300, eval_every=1000, checkpoint_every=500, n_trace=0),
    # 9×9 SATNet-like training, tested on SATNet-like, RRN-like (22–34) and RRN-17 (17–34) boards
    "medium": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"), n_train=9000,
                     n_test=1000, dim=256, heads=8, iterations=16, test_iterations=(8, 16, 32, 64), epochs=60,
                     batch_size=100, lr=5e-4, warmup_steps=300, eval_every=500, amp=True),
    # paper 003 (with AKOrN's protocol): D = 512, H = 8, Adam, 100 epochs, batch 100, T = 16, 5 seeds;
    # SATNet-like in distribution, RRN out of distribution; lr is not in our notes (our choice)
    "full": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"), n_train=9000,
                   n_test=1000, dim=512, heads=8, iterations=16, test_iterations=(8, 16, 32, 64, 128), epochs=100,
                   batch_size=100, lr=5e-4, weight_decay=0.0, warmup_steps=500, eval_every=1000,
                   seeds=(0, 1, 2, 3, 4), amp=True),
    # paper 004 (Hyper-SET): d = 768, 12 heads, 24 iterations, 200 epochs, batch 16, AdamW(0.9, 0.95), wd 0.1,
    # lr 1e-4 cosine, clip 1, 9k/1k RRN boards (rrn-like stands in; pass train_set="rrn:<dir>" for the files)
    "full-hyperset": Config(size=9, train_set="rrn-like", test_sets=("rrn-like", "rrn-17"), n_train=9000,
                            n_test=1000, dim=768, heads=12, iterations=24, test_iterations=(12, 24, 48),
                            epochs=200, batch_size=16, lr=1e-4, weight_decay=0.1, betas=(0.9, 0.95),
                            warmup_steps=0, grad_clip=1.0, eval_every=5000, amp=True),
}
CHAPTER = "08_hyperset"  # the chapter that trains it: notebooks/08_hyperset.ipynb
COST = {
    "quick": "about 1.5 min on one CPU thread (measured 78-93 s: 4x4 boards, d = 64, 1,170 steps, evaluation included)",
    "league-6x6": "about 90 min of one CPU core (4 layers x 3 seeds x 4,200 steps at 6x6, d = 64, T = 8; run as two "
                  "processes); committed as results/sudoku/league-6x6.json",
    "medium-cpu": "16 min on one CPU core (measured 976 s: 6x6 boards, d = 64, 5,600 steps; committed as "
                  "results/sudoku/medium-cpu.json)",
    "medium-cpu-9x9": "60 min of one CPU core (measured 3,625 s: 9x9, d = 64, T = 16, 8,992 steps of 32 boards; "
                      "committed as results/sudoku/medium-cpu-9x9.json)",
    "medium": "about 3 min (Transformer) to 10 min (Hyper-SET) on one GPU for its 5,400 steps (9x9, d = 256, T = 16; "
              "measured on an H200 shared with other jobs: 0.03 and 0.12 s/step, results/sudoku/gpu-9x9-d256.json); "
              "about 16 h on one CPU core (11 s/step measured)",
    "full": "paper 003 scale: 5 seeds x 9,000 steps at d = 512, T = 16: a few GPU hours (estimate)",
    "full-hyperset": "paper 004 scale: 112,500 steps at d = 768, T = 24: about a GPU day (estimate)",
}


def load_set(name: str, split: str, n: int, size: int, data_seed: int = 0) -> tasks.SudokuDataset:
    """The dataset called ``name`` (see the module docstring), its first ``n`` boards (or a seeded sample of n
    for RRN's files); ValueError if its boards are not ``size``×``size``."""
    if name.startswith("satnet:"):
        ds = tasks.load_satnet(name.split(":", 1)[1], "train" if split == "train" else "test")
        ds = tasks.SudokuDataset(ds.puzzles[:n], ds.solutions[:n])
    elif name.startswith("rrn:"):
        ds = tasks.load_rrn(name.split(":", 1)[1], split, limit=n, seed=data_seed)
    elif name in tasks.NAMED_SETS:
        base = tasks.NAMED_SETS[name]
        config = dataclasses.replace(base, n_train=n if split == "train" else base.n_train,
                                     n_test=n if split == "test" else base.n_test, seed=data_seed)
        ds = tasks.sudoku_dataset(config, split, progress=False)
    else:
        raise ValueError(f"unknown set {name!r}: use one of {sorted(tasks.NAMED_SETS)}, 'satnet:<dir>' or 'rrn:<dir>'")
    if ds.size != size:
        raise ValueError(f"set {name!r} has {ds.size}x{ds.size} boards, the config says size={size}")
    return ds


def make_model(config: Config) -> LoopedModel:
    return LoopedModel(LoopedConfig(size=config.size, dim=config.dim, heads=config.heads, ffn_mult=config.ffn_mult,
                                    layer=config.layer, iterations=config.iterations, inject=config.inject))


def blank_loss(model, batch):
    """Cross-entropy on the blanks only, and the cell accuracy there."""
    tokens, target, mask = batch
    logits = model(tokens)  # (B, N, n)
    loss = F.cross_entropy(logits[mask], target[mask])
    return loss, {"cell": (logits.argmax(-1)[mask] == target[mask]).float().mean()}


def regularised_loss(name: str, weight: float):
    """``blank_loss`` plus ``weight`` times the regulariser ``name`` of the model's layer (paper 003, Sec. 6.2)."""
    if name != "none" and name not in REGULARISERS:
        raise ValueError(f"regulariser must be 'none' or one of {sorted(REGULARISERS)}, got {name!r}")
    if name == "none" or weight == 0:
        return blank_loss

    def loss(model, batch):
        base, metrics = blank_loss(model, batch)
        penalty = regulariser(name, getattr(model, "module", model).layer)  # DDP wraps the model
        return base + weight * penalty, {**metrics, "reg": penalty.detach()}

    return loss


def epoch_batches(data: tasks.SudokuDataset, batch_size: int, seed: int):
    """``step -> (tokens, target, mask)``: each epoch a fresh seeded permutation, cut into full batches."""
    order = EpochOrder(len(data), batch_size)

    def batch(step: int):
        idx = order(step, seed)
        return data.tokens[idx], data.target[idx], data.mask[idx]

    return batch, order.steps_per_epoch


@torch.no_grad()
def test_time(model: LoopedModel, data: tasks.SudokuDataset, iterations, chunk: int = 500) -> dict[int, dict]:
    """{T: {"board", "cell"}} on the blanks of ``data``, reading out after each T of one pass (exact counts)."""
    device = next(model.parameters()).device
    right = {t: [0, 0, 0] for t in iterations}  # right cells, counted cells, solved boards
    was_training = model.training
    model.eval()
    for i in range(0, len(data), chunk):
        tokens, target, mask = (t[i:i + chunk].to(device) for t in (data.tokens, data.target, data.mask))
        for t, logits in model.readouts(tokens, iterations).items():
            ok = logits.argmax(-1) == target
            right[t][0] += int((ok & mask).sum())
            right[t][1] += int(mask.sum())
            right[t][2] += int((ok | ~mask).all(1).sum())
    model.train(was_training)
    return {t: {"board": r[2] / len(data), "cell": r[0] / max(r[1], 1)} for t, r in right.items()}


@torch.no_grad()
def iteration_metrics(model: LoopedModel, tokens: torch.Tensor, iterations: int) -> dict[str, list] | None:
    """Means over ``tokens`` of the layer's ``metrics(x, t)`` at t = 0..iterations (t = 0: x_0 = c), or None if the
    layer has none. For Hyper-SET also ``attention_mid``: E_ATTN after iteration t's attention half
    (``HyperSETLayer.attention_after_halves``; index 0 repeats t = 0), which splits each change of E_ATTN between
    the attention half and the feedforward half."""
    layer = model.layer
    if not hasattr(layer, "metrics"):
        return None
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    c = model.inputs(tokens.to(device))
    _, states = model(tokens.to(device), iterations, return_states=True)
    xs = [c] + states
    rows = [layer.metrics(x, max(t, 1)) for t, x in enumerate(xs)]
    out = {k: [round(float(r[k].double().mean()), 6) for r in rows] for k in rows[0]}
    if hasattr(layer, "attention_after_halves"):
        out["attention_mid"] = [out["attention"][0]] + [round(float(e.double().mean()), 6)
                                                        for e in layer.attention_after_halves(xs, c)]
    model.train(was_training)
    return out


def layer_lrs(config: Config) -> dict[str, float]:
    """``config.layer_lr`` ("name=lr" strings) as {name: lr}; ValueError for a malformed entry."""
    out = {}
    for item in config.layer_lr:
        name, _, value = str(item).partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            raise ValueError(f"layer_lr entries must read 'name=lr', got {item!r}") from None
        if not out[name] > 0:
            raise ValueError(f"layer_lr: the learning rate of {name!r} must be > 0, got {value}")
    return out


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train one looped model per seed and evaluate every test set at every test T; with ``layers``, a league:
    one such run per layer (in ``out_dir/<layer>``, each resumable on its own), merged (see :func:`merge_league`)."""
    if not config.layers:
        return _run_layer(config, out_dir, resume)
    lrs = layer_lrs(config)
    runs = {}
    for name in config.layers:
        sub = dataclasses.replace(config, layer=name, layers=(), layer_lr=(), lr=lrs.get(name, config.lr))
        runs[name] = _run_layer(sub, None if out_dir is None else os.path.join(out_dir, name), resume)
    return merge_league(config, runs)


def merge_league(config: Config, runs: dict[str, Results]) -> Results:
    """One Results for a league: ``tables["test_time"]`` rows gain a ``layer`` column; ``tables["league"]`` has one
    row per (layer, set, T) with the seed mean and sample standard deviation (ddof = 1) of board and cell accuracy;
    ``final["<layer>/<set>/<board|cell>@T<t>"]`` the means; ``extra["layers"][layer]`` each layer's curves,
    parameters, learning rate and traced metrics; histories as ``"<layer>/seed<s>"``."""
    merged = Results("sudoku", dataclasses.asdict(config))
    rows, league, layers = [], [], {}
    for name, res in runs.items():
        rows += [{"layer": name, **row} for row in res.tables["test_time"]]
        for key, history in res.histories.items():
            merged.histories[f"{name}/{key}"] = history
        for s in config.test_sets:
            for t in sorted(set(config.test_iterations)):
                got = [r for r in res.tables["test_time"] if r["set"] == s and r["iterations"] == t]
                row = {"layer": name, "set": s, "iterations": t, "seeds": len(got)}
                for k in ("board", "cell"):
                    v = torch.tensor([r[k] for r in got], dtype=torch.float64)
                    row[k] = float(v.mean())
                    row[f"{k}_std"] = float(v.std()) if len(got) > 1 else 0.0
                    merged.final[f"{name}/{s}/{k}@T{t}"] = row[k]
                league.append(row)
        layers[name] = {k: res.extra.get(k) for k in ("test_time", "test_time_clamped", "parameters", "metrics", "lr")}
        if "test_time_clamped" in res.tables:
            merged.tables.setdefault("test_time_clamped", []).extend(
                {"layer": name, **row} for row in res.tables["test_time_clamped"])
    merged.tables["test_time"], merged.tables["league"] = rows, league
    first = next(iter(runs.values()))
    merged.extra.update(layers=layers, trained_iterations=config.iterations, steps=first.extra["steps"],
                        device=first.extra["device"], givens=first.extra["givens"], chance_cell=1 / config.size)
    return merged


def train_seed(config: Config, seed: int, train_data: tasks.SudokuDataset, *, steps: int | None = None,
               eval_fn=None, device: torch.device | str = "cpu", out_dir: str | None = None,
               resume: bool = False) -> tuple[LoopedModel, History]:
    """The looped model ``config.layer`` trained with seed ``seed`` on ``train_data``, as :func:`run` trains each
    seed. ``steps`` stops it early (config.epochs epochs otherwise): the replays of committed runs train the first
    steps only, which inside the warm-up do not depend on the length of the run."""
    torch.manual_seed(seed)
    model = make_model(config)
    batches, per_epoch = epoch_batches(train_data, config.batch_size, seed)
    train_cfg = TrainConfig(
        steps=config.epochs * per_epoch if steps is None else steps, optimizer="adamw", lr=config.lr,
        weight_decay=config.weight_decay, betas=config.betas, schedule=config.schedule,
        warmup_steps=config.warmup_steps, grad_clip=config.grad_clip, log_every=max(1, min(per_epoch, 50)),
        eval_every=config.eval_every, checkpoint_every=config.checkpoint_every, device=str(device), amp=config.amp,
        seed=seed, progress=config.progress)
    history = train(model, regularised_loss(config.regulariser, config.reg_weight), batches, train_cfg,
                    eval_fn=eval_fn, out_dir=out_dir, resume=resume, identity=config_record(config))
    return model, history


def evaluate(config: Config, models: dict[int, LoopedModel]) -> Results:
    """The Results :func:`run` gives for ``config`` (one layer), from models already trained with it, one per seed
    of ``config.seeds`` (e.g. the packaged ``energylab.pretrained`` ones): the same test-time tables, curves and
    traces; the histories are empty."""
    if config.layers or sorted(models) != sorted(config.seeds):
        raise ValueError(f"evaluate takes one layer's config and one model per seed of {config.seeds}, "
                         f"got layers={config.layers} and models for seeds {sorted(models)}")
    return _run_layer(config, trained=models)


def _run_layer(config: Config, out_dir: str | None = None, resume: bool = False,
               trained: dict[int, LoopedModel] | None = None) -> Results:
    """Train one looped model (``config.layer``) per seed (or take ``trained[seed]``); evaluate every test set at
    every test T."""
    check_run_config(config)
    if config.batch_size < 1 or config.n_train < config.batch_size:
        raise ValueError(f"need n_train ({config.n_train}) >= batch_size ({config.batch_size}) >= 1")
    if not config.test_iterations or min(config.test_iterations) < 1:
        raise ValueError(f"test_iterations must hold positive ints, got {config.test_iterations!r}")
    if not config.seeds:
        raise ValueError("seeds must name at least one seed")
    device = choose_device(config.device)
    train_data = load_set(config.train_set, "train", config.n_train, config.size, config.data_seed)
    tests = {name: load_set(name, "test", config.n_test, config.size, config.data_seed) for name in config.test_sets}
    eval_data = None
    if config.test_sets:
        first = tests[config.test_sets[0]]
        eval_data = tasks.SudokuDataset(first.puzzles[:config.n_eval], first.solutions[:config.n_eval])
    results = Results("sudoku", dataclasses.asdict(config))
    rows, every = [], range(1, max(config.test_iterations) + 1)  # curves at every T, table rows at the listed ones
    curves = {name: {"iterations": list(every), "board": [0.0] * len(every), "cell": [0.0] * len(every)}
              for name in config.test_sets}
    traces, clamped, curves_clamped = [], [], {}
    eval_fn = None if eval_data is None else (
        lambda m: test_time(m, eval_data, (config.iterations,))[config.iterations])
    for s in config.seeds:
        if trained is not None:
            model, history = trained[s].to(device), History()
        else:
            model, history = train_seed(config, s, train_data, eval_fn=eval_fn, device=device,
                                        out_dir=None if out_dir is None else os.path.join(out_dir, f"seed{s}"),
                                        resume=resume)
        results.histories[f"seed{s}"] = history
        for name, data in tests.items():
            accs = test_time(model, data, every)
            for t in sorted(set(config.test_iterations)):
                rows.append({"seed": s, "set": name, "iterations": t, "trained_iterations": config.iterations,
                             **accs[t]})
            for k in ("board", "cell"):  # seed means
                curves[name][k] = [m + accs[t][k] / len(config.seeds) for m, t in zip(curves[name][k], every)]
        if hasattr(model.layer, "step_horizon"):  # also with the step sizes of t > T frozen at T's
            model.layer.step_horizon = config.iterations
            for name, data in tests.items():
                accs = test_time(model, data, every)
                for t in sorted(set(config.test_iterations)):
                    clamped.append({"seed": s, "set": name, "iterations": t, **accs[t]})
                for k in ("board", "cell"):
                    curves_clamped.setdefault(name, {"iterations": list(every), "board": [0.0] * len(every),
                                                     "cell": [0.0] * len(every)})
                    curves_clamped[name][k] = [m + accs[t][k] / len(config.seeds)
                                               for m, t in zip(curves_clamped[name][k], every)]
            model.layer.step_horizon = None
        if config.n_trace and config.test_sets:
            traces.append(iteration_metrics(model, tests[config.test_sets[0]].tokens[:config.n_trace], max(every)))
    results.tables["test_time"] = rows
    if clamped:
        results.tables["test_time_clamped"] = clamped
        results.extra["test_time_clamped"] = curves_clamped
    for row in rows:
        for k in ("board", "cell"):
            key = f"{row['set']}/{k}@T{row['iterations']}"
            results.final[key] = results.final.get(key, 0.0) + row[k] / len(config.seeds)
    metrics = None
    if traces and traces[0] is not None:  # seed means of the traced metrics, and each seed's
        metrics = {k: [sum(tr[k][i] for tr in traces) / len(traces) for i in range(len(traces[0][k]))]
                   for k in traces[0]}
        metrics["per_seed"] = traces
    results.extra.update(test_time=curves, trained_iterations=config.iterations, metrics=metrics, lr=config.lr,
                         parameters=sum(p.numel() for p in model.parameters()), device=str(device),
                         steps=config.epochs * (len(train_data) // config.batch_size),
                         givens={name: sorted({int(g) for g in d.givens()}) for name, d in tests.items()},
                         chance_cell=1 / config.size)
    return results
