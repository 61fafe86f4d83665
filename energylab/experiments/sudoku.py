"""Looped reasoning on Sudoku: one shared layer iterated T times, tested at other T (papers 003 and 004).

A :class:`~energylab.models.looped.LoopedModel` (embedding with learnable positions, one shared layer from
``energylab.layers.registry.LAYERS`` iterated ``iterations`` times, readout) is trained with cross-entropy on the
blanks only, then evaluated on an in-distribution and harder out-of-distribution sets at every T in
``test_iterations`` (test-time scaling: does running the loop longer than it was trained help?).

Data, loss, batches and the evaluation at every T are the harness of :mod:`energylab.tasks.sudoku_harness` (a set is
a name in ``energylab.tasks.sudoku.NAMED_SETS``, or the public files as ``"satnet:<dir>"`` / ``"rrn:<dir>"``); this
module is the experiment: its profiles, the model, one run per layer and the league that merges them.

Results: ``tables["test_time"]`` has one row per (seed, set, T in ``test_iterations``) with board and cell
accuracy (blanks only); ``extra["test_time"][set]`` holds the seed-mean curves ``{"iterations", "board",
"cell"}`` at every T from 1 to max(test_iterations) (one pass reads out after each iteration) for plots;
``histories["seed<s>"]`` the training curves; ``final["<set>/board@T<t>"]`` the headline numbers.
"""
from __future__ import annotations

import dataclasses
import os

import torch

from energylab._setup import choose_device
from energylab.engine.results import seed_spread
from energylab.engine.runs import config_record
from energylab.engine.train import History, Results, TrainConfig, train
from energylab.experiments.sudoku_profiles import CHAPTER, COST, LEAGUE_LR, PROFILES, Config  # noqa: F401 - API
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.tasks import sudoku as tasks
from energylab.tasks.sudoku_config import check_run_config
from energylab.tasks.sudoku_harness import epoch_batches, iteration_metrics, load_set, regularised_loss, test_time


def make_model(config: Config) -> LoopedModel:
    return LoopedModel(LoopedConfig(size=config.size, dim=config.dim, heads=config.heads, ffn_mult=config.ffn_mult,
                                    layer=config.layer, iterations=config.iterations, inject=config.inject))


def board_work(config: dict, layer: str, iterations: int) -> int:
    """The work of one board at ``iterations`` for ``layer`` built as a run's ``config`` (a Results.config) builds
    it: :meth:`energylab.models.looped.LoopedModel.work`, the FLOPs of its matrix products. No weights are needed."""
    return make_model(Config(**{**config_fields(config), "layer": layer})).work(iterations)


def config_fields(config: dict) -> dict:
    """The fields of :class:`Config` in a run's recorded config (a Results.config), tuples as tuples."""
    names = {f.name for f in dataclasses.fields(Config)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in config.items() if k in names}


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
    runs = {name: _run_layer(sub, None if out_dir is None else os.path.join(out_dir, name), resume)
            for name, sub in league_configs(config).items()}
    return merge_league(config, runs)


def league_configs(config: Config) -> dict[str, Config]:
    """A league's single-layer configs, {layer: config}: each layer at its learning rate (``layer_lr``)."""
    lrs = layer_lrs(config)
    return {name: dataclasses.replace(config, layer=name, layers=(), layer_lr=(), lr=lrs.get(name, config.lr))
            for name in config.layers}


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
                    row[k], row[f"{k}_std"] = seed_spread(r[k] for r in got)
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
    batches, per_epoch = epoch_batches(train_data, config.batch_size, seed, config.augment)
    train_cfg = TrainConfig(
        steps=config.epochs * per_epoch if steps is None else steps, optimizer="adamw", lr=config.lr,
        weight_decay=config.weight_decay, betas=config.betas, schedule=config.schedule,
        warmup_steps=config.warmup_steps, grad_clip=config.grad_clip, log_every=max(1, min(per_epoch, 50)),
        eval_every=config.eval_every, checkpoint_every=config.checkpoint_every, device=str(device), amp=config.amp,
        seed=seed, progress=config.progress, ema=config.ema)
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


def score_run(config: Config, out_dir: str, test_sets: tuple[str, ...]) -> Results:
    """The models a finished single-layer run left in ``out_dir`` (one per seed, the weights' average where the run
    kept one) scored on other ``test_sets`` at the run's test T, as :func:`evaluate` scores them: e.g. a 9×9 run on
    the boards that need search. Nothing is trained: a seed whose checkpoint is missing or short of the run's
    last step is a ValueError. A league's config scores every layer's run (in ``out_dir/<layer>``), merged as
    :func:`merge_league` merges them."""
    if config.layers:
        runs = {name: score_run(sub, os.path.join(out_dir, name), test_sets)
                for name, sub in league_configs(config).items()}
        return merge_league(dataclasses.replace(config, test_sets=tuple(test_sets)), runs)
    train_data = load_set(config.train_set, "train", config.n_train, config.size, config.data_seed)
    total = config.epochs * (len(train_data) // config.batch_size)
    models = {}
    for s in config.seeds:
        folder = os.path.join(out_dir, f"seed{s}")
        path = os.path.join(folder, "checkpoint.pt")
        step = torch.load(path, map_location="cpu", weights_only=True)["step"] if os.path.exists(path) else None
        if step != total:
            raise ValueError(f"{path}: the run has not finished (step {step} of {total}); resume it first")
        models[s], _ = train_seed(dataclasses.replace(config, progress=False), s, train_data, out_dir=folder,
                                  resume=True, device="cpu")  # at its last step: loads, trains nothing
    return evaluate(dataclasses.replace(config, test_sets=tuple(test_sets)), models)


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
