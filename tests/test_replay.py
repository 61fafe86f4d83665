"""Replay tests: re-run a short deterministic slice of each committed medium run with the library as it is now (one
seed, its first steps, the same schedule up to there) and compare it with the committed history.

A library change that alters a committed run (data, initialisation, batches, loss, optimiser, schedule, metrics)
fails here instead of silently orphaning the file. Tolerances allow float rounding only: the committed runs trained
several seeds at once (vmapped) where the replay trains one, on any x86-64 processor.
"""
import dataclasses

import pytest

from energylab.baselines import constant_accuracy
from energylab.committed import load_committed
from energylab.experiments import attractor, lis, nt
from energylab.tasks import nt as nt_tasks


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


@pytest.mark.xfail(strict=True, reason="open: replaying seed 0 alone gives eval/token 0.7420 at step 200 against the "
                   "committed 0.7389 (exact match, answer and step 0 agree); the committed run trained 3 seeds as one "
                   "vmapped ensemble: replay through the ensemble path to tell rounding from a library change")
def test_lis_medium_replays_its_warm_up():
    results, _ = load_committed("lis", "medium")
    cfg = dataclasses.replace(lis.PROFILES["medium"], epochs=1, variants=["MHA-only"], seeds=[0], device="cpu",
                              progress=False)  # 200 steps: all of them inside the 200-step warm-up
    replay = lis.run(cfg)
    got, want = replay.histories["L6/d32/MHA-only/seed0"], results.histories["L6/d32/MHA-only/seed0"]
    for name in ("eval/exact", "eval/token", "eval/answer", "eval/answer_greedy"):
        assert got.steps[name] == want.steps[name][:2] == [0, 200]
        _close(got.curves[name], want.curves[name][:2], 2.5 / 1024)  # at most two of 1,024 test samples differ
    _close(got.curves["loss"][:1], want.curves["loss"][:1], 1e-3)
    assert replay.extra["baselines"] == results.extra["baselines"]  # the same test set, the same baselines


@pytest.mark.xfail(strict=True, reason="open: replaying seed 0 alone gives held-out accuracy 0.679 at epoch 100 "
                   "against the committed 0.649 (epoch 0 agrees). Not the tree: rerun from a clean commit (85d844e), "
                   "the 16-seed vmapped ensemble reproduced the file bit for bit; the one-seed path and the ensemble "
                   "path part after epoch 0: replay through the ensemble to tell rounding from a library change")
def test_nt_medium_replays_its_first_300_epochs():
    results, _ = load_committed("nt", "medium")
    run = dataclasses.replace(nt.PROFILES["medium"].runs[0], epochs=300, overrides=(("seeds", 1),))
    cfg = dataclasses.replace(nt.PROFILES["medium"], runs=(run,), attentions=("DPA",), n_final_series=20,
                              device="cpu")
    got = nt.run(cfg).histories["N2T5-16/DPA/seed0"]
    want = results.histories["N2T5-16/DPA/seed0"]
    assert got.steps["eval/acc"] == want.steps["eval/acc"][:4] == [0, 100, 200, 300]
    _close(got.curves["eval/acc"], want.curves["eval/acc"][:4], 1e-6)
    _close(got.curves["eval/loss"], want.curves["eval/loss"][:4], 1e-4)


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
