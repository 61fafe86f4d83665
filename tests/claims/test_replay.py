"""Replay tests: re-run a short deterministic slice of each committed medium run with the library as it is now (one
seed, its first steps, the same schedule up to there) and compare it with the committed history.

A library change that alters a committed run (data, initialisation, batches, loss, optimiser, schedule, metrics)
fails here instead of silently orphaning the file. Tolerances allow float rounding only: the committed runs trained
several seeds at once (vmapped) where the replay trains one, on any x86-64 processor.
"""
import dataclasses

import pytest
import torch

from energylab._setup import seed_everything
from energylab.baselines import constant_accuracy
from energylab.engine.committed import load_committed
from energylab.engine.train import evaluate
from energylab.experiments import attractor, lis, nt
from energylab.tasks import lis as lis_tasks
from energylab.tasks import nt as nt_tasks

pytestmark = pytest.mark.slow  # pytest.ini: `-m "not slow"` skips it in a quick check


def _close(replayed, committed, atol):
    assert len(replayed) == len(committed)
    for a, b in zip(replayed, committed):
        assert abs(a - b) <= atol, (replayed, committed)


def test_attractor_medium_bare_model_replays_its_first_epoch():
    results, _ = load_committed("attractor", "medium")
    cfg = dataclasses.replace(attractor.PROFILES["medium"], epochs=1, device="cpu")  # StepLR: the first epoch is
    data = attractor.load_data(cfg)  # the same whatever the number of epochs; one epoch = 125 SGD steps
    _, history = attractor.train_bare(cfg, data, attractor.choose_device("cpu"))
    want = results.histories["bare"]
    k = len([s for s in history.steps["loss"] if s < 125])  # the windows that end inside the first epoch
    assert k == 4 and history.steps["loss"][:k] == want.steps["loss"][:k]
    _close(history.curves["loss"][:k], want.curves["loss"][:k], 1e-5)


def test_lis_medium_replays_its_warm_up_through_the_ensemble():
    """The committed run trained its 3 seeds as one vmapped ensemble: so does the replay (one seed alone sums in
    another order and parts from it in the 3rd digit by step 200). The first 200 steps are the warm-up, the same
    whatever the number of epochs; their evaluations agreed to every digit between AVX-512 and scalar kernels."""
    results, _ = load_committed("lis", "medium")
    cfg = dataclasses.replace(lis.PROFILES["medium"], epochs=1, variants=["MHA-only"], device="cpu", progress=False)
    replay = lis.run(cfg)
    for seed in cfg.seeds:
        got, want = replay.histories[f"L6/d32/MHA-only/seed{seed}"], results.histories[f"L6/d32/MHA-only/seed{seed}"]
        for name in ("eval/exact", "eval/token", "eval/answer", "eval/answer_greedy"):
            assert got.steps[name] == want.steps[name][:2] == [0, 200]
            _close(got.curves[name], want.curves[name][:2], 1.5 / 1024)  # at most one of 1,024 test samples
        _close(got.curves["loss"][:1], want.curves["loss"][:1], 1e-6)
    assert replay.extra["baselines"] == results.extra["baselines"]  # the same test set, the same baselines


def test_lis_long_replays_its_data_and_initial_models():
    """The long run differs from the medium one (whose training the test above replays) in its data (51,200
    samples), warm-up and length: its untrained evaluation of every seed and its baselines replay exactly."""
    results, _ = load_committed("lis", "long")
    cfg = lis.PROFILES["long"]
    (length,), (dim,) = cfg.lengths, cfg.dims
    data = lis_tasks.make_data(length, cfg.n_train, cfg.n_test, cfg.high, seed=cfg.data_seed, answers=cfg.answers)
    assert results.extra["baselines"] == {str(length): lis.trivial_baselines(data.test, length)}
    assert results.extra["steps_per_epoch"] == {str(length): lis.EpochBatches(data.train, cfg.batch_size)
                                                .steps_per_epoch}
    eval_fn = lis.make_eval_fn(data.test, length, greedy_answer=cfg.greedy_answer)
    for variant in cfg.variants:
        for seed in cfg.seeds:
            seed_everything(seed)  # as the ensemble builds its members
            got = evaluate(lis.make_model(cfg, length, dim, variant), eval_fn)
            want = results.histories[f"L{length}/d{dim}/{variant}/seed{seed}"]
            for name in ("eval/exact", "eval/token", "eval/answer_greedy"):
                assert want.steps[name][0] == 0
                assert abs(got[name.split("/")[1]] - want.curves[name][0]) <= 1.5 / 1024, (variant, name)


def _nt_replay(name: str, task: str, epochs: int, attention: str = "DPA", **config):
    """Replay the first ``epochs`` epochs of one task and attention of a committed NT run, all its seeds as one
    vmapped ensemble as committed, under this process's pinned numerics (conftest): the committed runs were made
    with the same pins (``energylab run --commit``), so every x86-64 processor reproduces them bit for bit. The
    held-out accuracy is chaotic in the kernels' last bits (unpinned, AVX-512 and AVX2 kernels gave visibly different
    accuracies after 100 epochs), so nothing looser than these pins would do."""
    results, provenance = load_committed("nt", name)
    assert provenance["numerics"] == "pinned"
    profile = nt.PROFILES[name]
    run = next(r for r in profile.runs if r.name == task)
    cfg = dataclasses.replace(profile, runs=(dataclasses.replace(run, epochs=epochs),), attentions=(attention,),
                              n_final_series=20, device="cpu", **config)
    import torch

    with torch.backends.mkldnn.flags(enabled=False):  # as configure_torch in the committing CLI process
        replay = nt.run(cfg)
    seeds = dict(run.overrides).get("seeds", profile.seeds)
    for seed in range(seeds):
        got = replay.histories[f"{task}/{attention}/seed{seed}"]
        want = results.histories[f"{task}/{attention}/seed{seed}"]
        k = len(got.steps["eval/acc"])
        assert got.steps["eval/acc"] == want.steps["eval/acc"][:k] and got.steps["eval/acc"][-1] == epochs
        _close(got.curves["eval/acc"], want.curves["eval/acc"][:k], 1e-6)
        _close(got.curves["eval/loss"], want.curves["eval/loss"][:k], 1e-5)


def test_nt_medium_replays_its_first_300_epochs():
    _nt_replay("medium", "N2T5-16", 300)


def test_nt_medium_n16t2_replays_its_first_100_epochs():
    _nt_replay("medium-n16t2", "N16T2-16", 100)


def test_nt_figures_replays_its_first_task_for_100_epochs():
    # a run's data are seeded by the task's index in the profile (nt._data_index): replay the first one
    _nt_replay("figures", "N16T2-32", 100)


def test_nt_n16t2_causes_replays_the_unclipped_run_for_100_epochs():
    _nt_replay("n16t2-causes", "N16T2-16+sum+noclip", 100, attention="EA")


@pytest.mark.parametrize("task", ["N16T2-16", "N16T2-32"])
def test_nt_long_run_continues_the_medium_run_exactly(task):
    """long-n16t2 trains the tasks of medium-n16t2 with the same seeds, data and constant learning rate, only for
    longer: at every epoch both evaluated, their held-out curves are the same numbers (a replay of the medium run
    by the long one, 1,000-2,000 epochs deep)."""
    medium, _ = load_committed("nt", "medium-n16t2")
    long, _ = load_committed("nt", "long-n16t2")
    compared = 0
    for key, want in medium.histories.items():
        if not key.startswith(task + "/"):
            continue
        got = long.histories[key]
        common = sorted(set(got.steps["eval/acc"]) & set(want.steps["eval/acc"]))
        assert common[0] == 0 and common[-1] == want.steps["eval/acc"][-1]
        for step in common:
            a = got.curves["eval/acc"][got.steps["eval/acc"].index(step)]
            b = want.curves["eval/acc"][want.steps["eval/acc"].index(step)]
            assert a == b, (key, step, a, b)
        compared += len(common)
    assert compared >= 16 * 3


def test_nt_best_constant_predictor():
    """The input-blind column of chapter 5: the most frequent next symbol of training series, scored on the held-out
    windows of the committed runs. N2T5's all-zero state is a fixed point, so 0 is a little more frequent than 1."""
    task = nt.PROFILES["medium"].runs[0]
    train_y = [nt.epoch_batch(task, 40, seed, epoch)[1] for seed in range(4) for epoch in range(200)]
    import torch

    held_out = nt.eval_set(task, 500, 50, seed=20_000)["NT"][1]
    acc = constant_accuracy(torch.cat(train_y), held_out)
    assert 0.5 <= acc < 0.56
    results, _ = load_committed("nt", "medium")
    assert results.final["N2T5-16/DPA/acc_mean"] - acc > 0.4  # every DPA seed solved it
    assert results.final["N2T5-16/EA/acc_mean"] - acc > 0.1  # EA in the mean, see chapter 5
    x, y = nt_tasks.batch(16, 2, 16, 50, "NT", 200, torch.Generator().manual_seed(0))
    assert abs(constant_accuracy(y, y) - 1 / 16) < 0.01  # N16T2: the paper's 1/16 baseline


def test_recurrent_medium_replays_its_first_epoch():
    """One model of the committed run (ItrSA), its first epoch of 39 steps: inside the 50-step warm-up, so the same
    whatever the number of epochs; the first loss window must match."""
    from energylab.experiments import recurrent
    from energylab.tasks.sudoku_harness import load_set

    results, _ = load_committed("recurrent", "medium")
    cfg = dataclasses.replace(recurrent.PROFILES["medium"], epochs=1, layers=("itrsa",))
    train_data = load_set(cfg.train_set, "train", cfg.n_train, cfg.size)
    torch.manual_seed(cfg.seed)  # as run() does before loading the data
    _, got = recurrent.train_model(cfg, "itrsa", train_data)
    want = results.histories["itrsa"]
    assert got.steps["loss"] == want.steps["loss"][:1] == [39]
    _close(got.curves["loss"], want.curves["loss"][:1], 1e-5)


def test_attractor_decide_base_replays_its_first_epoch():
    """The decide runs are the quick profile with overrides (their provenance says which); decide-base's first epoch
    (before the step decay at epoch 10) must match."""
    results, provenance = load_committed("attractor", "decide-base")
    assert "--profile quick" in provenance["command"]
    cfg = dataclasses.replace(attractor.PROFILES["quick"], **{k: results.config[k] for k in (
        "baseline", "n_eval", "n_long", "example_times")}, epochs=1, device="cpu")
    cfg = dataclasses.replace(cfg, example_times=tuple(cfg.example_times))
    _, history = attractor.train_bare(cfg, attractor.load_data(cfg), attractor.choose_device("cpu"))
    want = results.histories["bare"]
    k = len(history.steps["loss"]) - 1  # the last window is cut short by the end of this one-epoch run
    assert k >= 2 and history.steps["loss"][:k] == want.steps["loss"][:k]
    _close(history.curves["loss"][:k], want.curves["loss"][:k], 1e-5)


@pytest.mark.parametrize("name", ["medium-cpu", "medium-cpu-9x9"])
def test_sudoku_medium_runs_replay_their_first_50_steps(name):
    """The first 50 steps of the committed looped Transformer, inside the warm-up (so the same whatever the length
    of the run), trained as ``sudoku.run`` trains each seed; the first loss window must match."""
    from energylab.experiments import sudoku
    from energylab.tasks.sudoku_harness import load_set

    results, _ = load_committed("sudoku", name)
    cfg = dataclasses.replace(sudoku.PROFILES[name], device="cpu", progress=False)
    assert cfg.warmup_steps >= 50 and len(cfg.seeds) == 1 and results.config["lr"] == cfg.lr
    s = cfg.seeds[0]
    train_data = load_set(cfg.train_set, "train", cfg.n_train, cfg.size, cfg.data_seed)
    _, got = sudoku.train_seed(cfg, s, train_data, steps=50)
    want = results.histories[f"seed{s}"]
    assert got.steps["loss"] == want.steps["loss"][:1] == [50]
    _close(got.curves["loss"], want.curves["loss"][:1], 1e-4)
