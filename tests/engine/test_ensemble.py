"""Seed ensembles: one vmapped run of S seeds equals S independent runs of the engine."""
import pytest
import torch
from torch import nn

from energylab.engine.ensemble import curve_stack, train_ensemble
from energylab.engine.train import TrainConfig, TrainingDiverged, train

D_IN, HID, D_OUT, B = 5, 11, 3, 7  # distinct primes
SEEDS = [0, 3, 4]


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D_IN, HID), nn.Tanh(), nn.Linear(HID, D_OUT)).double()


def batches(step, seed):
    g = torch.Generator().manual_seed(10_000 * seed + step)
    x = torch.randn(B, D_IN, generator=g, dtype=torch.float64)
    return x, torch.sin(x[:, :D_OUT] * 2.0)


def loss_fn(model, batch):
    x, y = batch
    out = model(x)
    return ((out - y) ** 2).mean(), {"acc": (out.sign() == y.sign()).double().mean()}


def eval_fn(model):
    x, y = batches(999, 77)
    return {"mse": ((model(x) - y) ** 2).mean()}


CFG = TrainConfig(steps=30, optimizer="sgd", lr=0.05, momentum=0.8, schedule="cosine", warmup_steps=3,
                  grad_clip=0.5, eval_every=10, log_every=2, progress=False)


def _independent(cfg, seeds=SEEDS):
    runs = []
    for s in seeds:
        model = make_model(s)
        h = train(model, loss_fn, lambda step, s=s: batches(step, s), TrainConfig(**{**cfg.__dict__, "seed": s}),
                  eval_fn=eval_fn)
        runs.append((model, h))
    return runs


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_vmapped_ensemble_matches_independent_runs(optimizer):
    cfg = TrainConfig(**{**CFG.__dict__, "optimizer": optimizer, "weight_decay": 0.01})
    ens = train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, eval_fn=eval_fn)
    assert ens.vmapped
    for (model, h), m2, h2 in zip(_independent(cfg), ens.models, ens.histories):
        assert h.steps == h2.steps
        for name in h.curves:
            assert torch.allclose(torch.tensor(h.curves[name]), torch.tensor(h2.curves[name]), rtol=1e-10, atol=1e-12)
        for p, q in zip(model.parameters(), m2.parameters()):
            assert torch.allclose(p, q, rtol=1e-10, atol=1e-12)
    steps, losses = ens.curve("loss")
    assert losses.shape == (3, 15) and steps[-1] == 30
    assert len(set(losses[:, -1].tolist())) == 3  # the members really differ
    assert (losses[:, -1] < losses[:, 0]).all()  # and each one learns


def test_ensemble_after_step_sees_stacked_params_and_clipping_is_per_member():
    seen = []

    def project(params, step):
        seen.append(step)
        with torch.no_grad():
            w = params["0.weight"]  # (S, HID, D_IN)
            w.mul_(1.5 / w.flatten(1).norm(dim=1).view(-1, 1, 1))

    ens = train_ensemble(make_model, loss_fn, batches, CFG, SEEDS, after_step=project)
    assert seen == list(range(30))
    for m in ens.models:
        assert m[0].weight.norm().item() == pytest.approx(1.5, rel=1e-12)


def test_ensemble_resume_equals_uninterrupted(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "checkpoint_every": 8})
    full = train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, eval_fn=eval_fn, out_dir=str(tmp_path / "a"))

    def boom(params, step):
        if step == 19:
            raise KeyboardInterrupt

    out = str(tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, eval_fn=eval_fn, out_dir=out, after_step=boom)
    resumed = train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, eval_fn=eval_fn, out_dir=out, resume=True)
    assert [h.curves for h in resumed.histories] == [h.curves for h in full.histories]
    with pytest.raises(ValueError, match="does not match this ensemble"):
        train_ensemble(make_model, loss_fn, batches, cfg, [0, 3], out_dir=out, resume=True)


class Branchy(nn.Module):
    """Data-dependent Python control flow: vmap cannot trace it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(D_IN, D_OUT).double()

    def forward(self, x):
        out = self.lin(x)
        return out if out.sum().item() > -1e9 else -out


def test_fallback_to_sequential_when_not_vmappable():
    def make(seed):
        torch.manual_seed(seed)
        return Branchy()

    cfg = TrainConfig(**{**CFG.__dict__, "steps": 6})
    with pytest.warns(UserWarning, match="vmap failed"):
        ens = train_ensemble(make, loss_fn, batches, cfg, [1, 2])
    assert not ens.vmapped and len(ens.histories) == 2
    with pytest.raises(ValueError, match="cannot be trained under vmap"):
        train_ensemble(make, loss_fn, batches, cfg, [1, 2], vmapped=True)


def test_ensemble_errors():
    with pytest.raises(ValueError, match="seeds"):
        train_ensemble(make_model, loss_fn, batches, CFG, [1, 1])
    with pytest.raises(ValueError, match="vmapped"):
        train_ensemble(make_model, loss_fn, batches, CFG, [1], vmapped="yes")

    def nan_loss(model, batch):
        loss, m = loss_fn(model, batch)
        return loss * float("nan"), m

    with pytest.raises(TrainingDiverged, match="step 0"):
        train_ensemble(make_model, nan_loss, batches, CFG, SEEDS)
    with pytest.raises(ValueError, match="different steps"):
        h1, h2 = [train(make_model(s), loss_fn, lambda st: batches(st, 0), TrainConfig(steps=n, progress=False))
                  for s, n in ((0, 3), (1, 4))]
        curve_stack([h1, h2], "loss")


def test_ensemble_run_folder_rules(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 6, "checkpoint_every": 2})
    out = str(tmp_path / "ens")
    train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, out_dir=out, identity={"n_batch": 40})
    with pytest.raises(ValueError, match=r"already holds a run \(checkpoint.pt\); pass resume=True"):
        train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, out_dir=out)
    with pytest.raises(ValueError, match=r"config\.n_batch: 40 \(checkpoint\) != 20 \(now\)"):
        train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, out_dir=out, resume=True, identity={"n_batch": 20})
    with pytest.raises(ValueError, match=r"train\.grad_clip: 0\.5 \(checkpoint\) != None \(now\)"):
        train_ensemble(make_model, loss_fn, batches, TrainConfig(**{**cfg.__dict__, "grad_clip": None}), SEEDS,
                       out_dir=out, resume=True, identity={"n_batch": 40})
    # the sequential fallback keeps the same rules in its per-seed folders
    seq = str(tmp_path / "seq")
    train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, out_dir=seq, vmapped=False, identity={"n_batch": 40})
    with pytest.raises(ValueError, match=r"seed0' already holds a run"):
        train_ensemble(make_model, loss_fn, batches, cfg, SEEDS, out_dir=seq, vmapped=False)

    def nan_late(model, batch):
        loss, m = loss_fn(model, batch)
        return loss * (float("nan") if nan_late.calls >= 5 else 1.0), m
    nan_late.calls = 0

    def count(params, step):
        nan_late.calls += 1

    with pytest.raises(TrainingDiverged, match=r"step 5 \(0-based\) for seeds \[0, 3, 4\]; the last good checkpoint "
                                               r"\(step 4\) is kept in .*nan.checkpoint.pt$"):
        train_ensemble(make_model, nan_late, batches, cfg, SEEDS, out_dir=str(tmp_path / "nan"), after_step=count)


def test_compiled_ensemble_matches_independent_runs_and_compiles_once():
    """compile=True: the vmapped step runs as compiled graphs (counted by dynamo), compiled once for two runs,
    with the same histories (steps, names) as the eager independent runs and their numbers up to rounding."""
    from torch._dynamo.utils import counters

    cfg = TrainConfig(**{**CFG.__dict__, "steps": 12, "eval_every": 6, "log_every": 4})
    compiled = TrainConfig(**{**cfg.__dict__, "compile": True})
    counters.clear()
    first = train_ensemble(make_model, loss_fn, batches, compiled, SEEDS, eval_fn=eval_fn, vmapped=True)
    graphs = counters["stats"]["unique_graphs"]
    second = train_ensemble(make_model, loss_fn, batches, compiled, SEEDS, eval_fn=eval_fn, vmapped=True)
    assert graphs >= 1 and counters["stats"]["unique_graphs"] == graphs  # compiled, and not again
    for ens in (first, second):
        assert ens.vmapped
        for (model, h), m2, h2 in zip(_independent(cfg), ens.models, ens.histories):
            assert h.steps == h2.steps and set(h.curves) == set(h2.curves) == {"loss", "acc", "eval/mse"}
            for name in h.curves:
                assert torch.allclose(torch.tensor(h.curves[name]), torch.tensor(h2.curves[name]), rtol=1e-9,
                                      atol=1e-11)
            for p, q in zip(model.parameters(), m2.parameters()):
                assert torch.allclose(p, q, rtol=1e-9, atol=1e-11)
    assert all(torch.equal(p, q) for a, b in zip(first.models, second.models)
               for p, q in zip(a.parameters(), b.parameters()))
