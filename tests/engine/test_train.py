"""The training engine: reproducibility, exact resume, schedules, hooks, JSON history, error paths."""
import json
import math
import os
import threading
import warnings

import pytest
import torch
from torch import nn

from energylab.engine.runs import atomic_write, write_json
from energylab.engine.train import CHECKPOINT, History, Results, TrainConfig, TrainingDiverged, lr_multiplier, train

D_IN, D_OUT, N_DATA, B = 7, 3, 53, 11  # distinct primes


def _data():
    g = torch.Generator().manual_seed(123)
    x = torch.randn(N_DATA, D_IN, generator=g)
    w = torch.randn(D_IN, D_OUT, generator=g)
    return x, torch.tanh(x @ w)


X, Y = _data()


def batches(step):
    g = torch.Generator().manual_seed(1000 + step)
    idx = torch.randint(0, N_DATA, (B,), generator=g)
    return X[idx], Y[idx]


def make_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D_IN, 13), nn.Dropout(0.2), nn.Tanh(), nn.Linear(13, D_OUT))


def loss_fn(model, batch):
    x, y = batch
    out = model(x)
    return ((out - y) ** 2).mean(), {"acc": (out.sign() == y.sign()).float().mean()}


def eval_fn(model):
    return {"mse": ((model(X) - Y) ** 2).mean()}


CFG = TrainConfig(steps=40, lr=3e-2, optimizer="sgd", momentum=0.8, schedule="cosine", warmup_steps=5,
                  grad_clip=1.0, eval_every=10, log_every=3, progress=False, seed=5)


def test_same_seed_is_bit_identical_and_other_seed_differs():
    h1 = train(make_model(), loss_fn, batches, CFG, eval_fn=eval_fn)
    h2 = train(make_model(), loss_fn, batches, CFG, eval_fn=eval_fn)
    h3 = train(make_model(), loss_fn, batches, TrainConfig(**{**CFG.__dict__, "seed": 6}), eval_fn=eval_fn)
    assert h1.curves == h2.curves and h1.steps == h2.steps
    assert h1.curves["loss"] != h3.curves["loss"]  # the seed drives dropout
    assert h1.steps["eval/mse"] == [10, 20, 30, 40]
    assert h1.steps["loss"] == list(range(3, 40, 3)) + [40]  # windows of log_every, last one partial
    assert h1.last("eval/mse") < 0.5 * eval_fn(make_model())["mse"].item()  # it learns


class _Kill(Exception):
    pass


def _killer(at):
    def after_step(model, step):
        if step == at:
            raise _Kill
    return after_step


@pytest.mark.parametrize("kill_at", [13, 27])
def test_resume_equals_uninterrupted(tmp_path, kill_at):
    cfg = TrainConfig(**{**CFG.__dict__, "checkpoint_every": 8, "optimizer": "adamw", "weight_decay": 0.01})
    full_model = make_model()
    full = train(full_model, loss_fn, batches, cfg, eval_fn=eval_fn, out_dir=str(tmp_path / "a"))
    out = str(tmp_path / "b")
    with pytest.raises(_Kill):
        train(make_model(), loss_fn, batches, cfg, eval_fn=eval_fn, out_dir=out, after_step=_killer(kill_at))
    state = torch.load(os.path.join(out, CHECKPOINT), weights_only=True)
    assert state["step"] == 8 * (kill_at // 8)
    resumed_model = make_model(seed=99)  # weights come from the checkpoint, not from this init
    resumed = train(resumed_model, loss_fn, batches, cfg, eval_fn=eval_fn, out_dir=out, resume=True)
    assert resumed.curves == full.curves and resumed.steps == full.steps
    for p, q in zip(full_model.parameters(), resumed_model.parameters()):
        assert torch.equal(p, q)
    # resuming a finished run is a no-op that returns the stored history
    again = train(make_model(), loss_fn, batches, cfg, eval_fn=eval_fn, out_dir=out, resume=True)
    assert again.curves == full.curves


def test_lr_schedules():
    cfg = TrainConfig(steps=100, warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)
    f = lr_multiplier(cfg, 100)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0) and f(10) == pytest.approx(1.0)
    assert f(55) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    g = lr_multiplier(TrainConfig(steps=100, schedule="step", lr_step=30, lr_gamma=0.5), 100)
    assert [g(s) for s in (0, 29, 30, 61, 99)] == [1.0, 1.0, 0.5, 0.25, 0.125]
    assert lr_multiplier(TrainConfig(), 100)(57) == 1.0


def test_after_step_hook_runs_after_every_optimizer_step():
    seen = []

    def project(model, step):
        seen.append(step)
        with torch.no_grad():
            w = model[0].weight
            w.mul_(2.0 / w.norm())

    model = make_model()
    train(model, loss_fn, batches, TrainConfig(**{**CFG.__dict__, "steps": 9}), after_step=project)
    assert seen == list(range(9))
    assert model[0].weight.norm().item() == pytest.approx(2.0, rel=1e-6)


def test_iterable_batches_with_epochs(tmp_path):
    ds = torch.utils.data.TensorDataset(X, Y)
    loader = torch.utils.data.DataLoader(ds, batch_size=B, shuffle=False)
    cfg = TrainConfig(epochs=3, lr=1e-2, progress=False, log_every=1)
    h = train(make_model(), loss_fn, loader, cfg)
    assert h.steps["loss"][-1] == 3 * len(loader) == 15
    with pytest.raises(ValueError, match="epochs needs batches"):
        train(make_model(), loss_fn, batches, cfg)


def test_history_and_results_json_roundtrip(tmp_path):
    h = train(make_model(), loss_fn, batches, TrainConfig(**{**CFG.__dict__, "steps": 12}), eval_fn=eval_fn)
    h.save(str(tmp_path / "h.json"))
    assert History.load(str(tmp_path / "h.json")) == h
    r = Results("toy", {"steps": 12}, histories={"seed0": h}, final={"mse": h.last("eval/mse")},
                tables={"t": [{"a": 1}]}, extra={"m": [[0.5, 0.25]]})
    r.save(str(tmp_path / "run"))
    back = Results.load(str(tmp_path / "run"))
    assert back == r and back.histories["seed0"].final == h.final
    with pytest.raises(FileNotFoundError, match="python -m energylab run"):
        Results.load(str(tmp_path / "missing"))


def test_nan_loss_stops_naming_step_and_keeps_checkpoint(tmp_path):
    def nan_after(model, batch):
        loss, m = loss_fn(model, batch)
        return (loss * float("nan") if nan_after.calls >= 17 else loss), m
    nan_after.calls = 0

    def count(model, step):
        nan_after.calls += 1

    cfg = TrainConfig(**{**CFG.__dict__, "checkpoint_every": 5})
    with pytest.raises(TrainingDiverged, match="step 17") as err:
        train(make_model(), nan_after, batches, cfg, out_dir=str(tmp_path), after_step=count)
    assert err.value.step == 17
    assert str(err.value).endswith(f"the last good checkpoint (step 15) is kept in {tmp_path / CHECKPOINT}")
    state = torch.load(os.path.join(tmp_path, CHECKPOINT), weights_only=True)
    assert state["step"] == 15
    assert all(torch.isfinite(v).all() for v in state["model"].values())


def test_unwritable_out_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match="out_dir=.* is not writable"):
        train(make_model(), loss_fn, batches, CFG, out_dir=str(blocker / "sub"))


def test_corrupt_and_mismatched_checkpoints(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 6})
    out = str(tmp_path / "run")
    train(make_model(), loss_fn, batches, cfg, out_dir=out)
    other = nn.Sequential(nn.Linear(D_IN, 17), nn.Tanh(), nn.Linear(17, D_OUT))
    with pytest.raises(ValueError, match="does not match the model"):
        train(other, loss_fn, batches, cfg, out_dir=out, resume=True)
    with pytest.raises(ValueError, match=r"another config: train\.lr: 0\.03 \(checkpoint\) != 0\.5 \(now\)"):
        train(make_model(), loss_fn, batches, TrainConfig(**{**cfg.__dict__, "lr": 0.5}), out_dir=out, resume=True)
    with open(os.path.join(out, CHECKPOINT), "wb") as f:
        f.write(b"garbage, not a zip")
    with pytest.raises(ValueError, match="corrupt"):
        train(make_model(), loss_fn, batches, cfg, out_dir=out, resume=True)


@pytest.mark.parametrize("field,value,msg", [("optimizer", "adam", "optimizer"), ("schedule", "linear", "schedule"),
                                             ("steps", 0, "steps"), ("lr", -1.0, "lr"), ("grad_clip", 0.0, "grad_clip"),
                                             ("eval_every", -2, "eval_every")])
def test_bad_config_names_the_field(field, value, msg):
    with pytest.raises(ValueError, match=msg):
        train(make_model(), loss_fn, batches, TrainConfig(**{**CFG.__dict__, field: value}))
    with pytest.raises(ValueError, match="resume=True needs an out_dir"):
        train(make_model(), loss_fn, batches, CFG, resume=True)


# --- iterables: trained one epoch after another, never resumed

def test_resume_needs_callable_batches(tmp_path):
    # an iterable's position is not recorded, so its run cannot resume: refused before anything is written
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=B, shuffle=True)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="resume=True needs batches as a callable step -> batch"):
        train(make_model(), loss_fn, loader, CFG, out_dir=str(out), resume=True)
    assert not out.exists()
    with pytest.warns(UserWarning, match="can never be resumed"):
        h = train(make_model(), loss_fn, loader, TrainConfig(**{**CFG.__dict__, "steps": 12}), out_dir=str(out))
    assert h.steps["loss"][-1] == 12 and "data" not in torch.load(out / CHECKPOINT, weights_only=True)


def test_empty_or_exhausted_batches_name_batches():
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 5})
    with pytest.raises(ValueError, match="batches yielded no batch at step 0"):
        train(make_model(), loss_fn, [], cfg)
    with pytest.raises(ValueError, match="batches yielded no batch at step 0"):
        train(make_model(), loss_fn, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:0])), cfg)
    with pytest.raises(ValueError, match="batches is empty"):
        train(make_model(), loss_fn, [], TrainConfig(epochs=2, progress=False))
    with pytest.raises(ValueError, match="batches ran out at step 3: a one-shot iterator"):
        train(make_model(), loss_fn, (batches(s) for s in range(3)), cfg)
    with pytest.raises(ValueError, match="batches must be a callable step -> batch or an iterable"):
        train(make_model(), loss_fn, 42, cfg)


# --- run folders: identity, no overwriting, atomic files

def test_fresh_run_refuses_a_folder_holding_a_run(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 6})
    out = str(tmp_path / "run")
    train(make_model(), loss_fn, batches, cfg, out_dir=out)
    before = open(os.path.join(out, CHECKPOINT), "rb").read()
    with pytest.raises(ValueError, match=r"out_dir '.*run' already holds a run \(checkpoint.pt\); pass resume=True"):
        train(make_model(), loss_fn, batches, TrainConfig(**{**cfg.__dict__, "lr": 0.5}), out_dir=out)
    assert open(os.path.join(out, CHECKPOINT), "rb").read() == before
    assert sorted(os.listdir(out)) == [CHECKPOINT]


def test_resume_checks_the_whole_identity(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 6})
    out = str(tmp_path / "run")
    train(make_model(), loss_fn, batches, cfg, out_dir=out, identity={"n_batch": 40, "task": "NT"})
    with pytest.raises(ValueError, match=r"config\.n_batch: 40 \(checkpoint\) != 20 \(now\)$|"
                                         r"config\.n_batch: 40 \(checkpoint\) != 20 \(now\);"):
        train(make_model(), loss_fn, batches, cfg, out_dir=out, resume=True, identity={"n_batch": 20, "task": "NT"})
    with pytest.raises(ValueError, match=r"train\.eval_every: 10 \(checkpoint\) != 3 \(now\)"):
        train(make_model(), loss_fn, batches, TrainConfig(**{**cfg.__dict__, "eval_every": 3}), out_dir=out,
              resume=True, identity={"n_batch": 40, "task": "NT"})
    # where and how visibly it runs may change: device, progress, checkpoint_every
    same = TrainConfig(**{**cfg.__dict__, "device": "cpu", "progress": False, "checkpoint_every": 2})
    h = train(make_model(), loss_fn, batches, same, out_dir=out, resume=True, identity={"n_batch": 40, "task": "NT"})
    assert h.steps["loss"][-1] == 6


def test_concurrent_writers_never_tear_a_file(tmp_path):
    path = str(tmp_path / "results.json")
    payloads = [{"writer": w, "data": [w * 1.5] * 100_000} for w in range(2)]
    errors = []

    def writer(w):
        try:
            for _ in range(15):
                write_json(path, payloads[w])
        except Exception as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with open(path) as f:
        assert json.load(f) in payloads
    assert os.listdir(tmp_path) == ["results.json"]  # no temporary file left behind

    def fail(f):
        f.write("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, fail)
    with open(path) as f:
        assert json.load(f) in payloads  # the old file is intact
    assert os.listdir(tmp_path) == ["results.json"]


def test_truncated_results_and_history_name_their_path(tmp_path):
    h = History()
    h.log(1, {"loss": 0.5})
    Results("toy", {"steps": 1}, histories={"seed0": h}).save(str(tmp_path))
    path = tmp_path / "results.json"
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    with pytest.raises(ValueError, match=f"{path} is truncated or corrupt"):
        Results.load(str(tmp_path))
    path.write_text('{"experiment": "toy"}')
    with pytest.raises(ValueError, match=f"{path} is not an energylab results file"):
        Results.load(str(tmp_path))
    (tmp_path / "h.json").write_text('{"steps": {"loss": [1]}, "curv')
    with pytest.raises(ValueError, match="h.json is truncated or corrupt"):
        History.load(str(tmp_path / "h.json"))


@pytest.mark.parametrize("device", ["meta", "xpu", "cuda:7", "nonsense"])
def test_unsupported_devices_are_refused_before_anything_is_created(tmp_path, device):
    if device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    with pytest.raises(ValueError, match=f"device='{device}'"):
        train(make_model(), loss_fn, batches, TrainConfig(device=device, progress=False), out_dir=str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------- NaN gradients behind a finite loss (issue 47)

def _masked_nan_case():
    """A loss that is finite while its gradient is NaN: the NaN input sits behind torch.where's mask."""
    import torch

    model = torch.nn.Linear(2, 1)
    good = torch.ones(4, 2)
    bad = good.clone()
    bad[0, 0] = float("nan")

    def loss_fn(m, batch):
        out = m(batch).squeeze(-1)
        return torch.where(torch.isfinite(out), out, torch.zeros_like(out)).pow(2).mean(), {}

    return model, loss_fn, lambda step: good if step < 3 else bad


def test_a_nan_gradient_behind_a_finite_loss_stops_before_the_checkpoint_is_overwritten(tmp_path):
    import torch

    from energylab.engine.runs import CHECKPOINT
    from energylab.engine.train import TrainConfig, TrainingDiverged, train

    model, loss_fn, batches = _masked_nan_case()
    loss, _ = loss_fn(model, batches(3))
    loss.backward()
    assert torch.isfinite(loss) and not torch.isfinite(model.weight.grad).all()  # the case is what it claims
    cfg = TrainConfig(steps=6, lr=0.1, checkpoint_every=1, progress=False, device="cpu")
    with pytest.raises(TrainingDiverged, match=r"gradient is NaN.*step 3\)") as err:
        train(model, loss_fn, batches, cfg, out_dir=str(tmp_path))
    assert err.value.step == 3
    saved = torch.load(tmp_path / CHECKPOINT, weights_only=True)  # what runs.load_checkpoint reads
    assert saved["step"] == 3 and all(torch.isfinite(t).all() for t in saved["model"].values())
    assert torch.isfinite(model.weight).all()  # the bad step changed nothing


def test_the_ensemble_stops_on_a_nan_gradient_too(tmp_path):
    import torch

    from energylab.engine.ensemble import train_ensemble
    from energylab.engine.runs import CHECKPOINT
    from energylab.engine.train import TrainConfig, TrainingDiverged

    _, loss_fn, batches = _masked_nan_case()
    cfg = TrainConfig(steps=6, lr=0.1, checkpoint_every=1, progress=False, device="cpu")
    with pytest.raises(TrainingDiverged, match="gradient is NaN"):
        train_ensemble(lambda s: torch.nn.Linear(2, 1), loss_fn, lambda step, seed: batches(step), cfg, [0, 1],
                       out_dir=str(tmp_path))
    saved = torch.load(tmp_path / CHECKPOINT, weights_only=True)  # what runs.load_checkpoint reads
    assert saved["step"] == 3 and all(torch.isfinite(t).all() for t in saved["params"].values())


def test_an_iterable_with_an_out_dir_warns_that_it_cannot_resume(tmp_path):
    """Its checkpoints record no position in the iterable: resume=True refuses them, so say so when they are written."""
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=B)
    cfg = TrainConfig(**{**CFG.__dict__, "steps": 3})
    with pytest.warns(UserWarning, match=r"^out_dir='.*' with batches from an iterable \(DataLoader\): the "
                                         r"checkpoints it writes can never be resumed"):
        train(make_model(), loss_fn, loader, cfg, out_dir=str(tmp_path / "run"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        train(make_model(), loss_fn, loader, cfg)  # no out_dir: nothing to resume, no warning
        train(make_model(), loss_fn, batches, cfg, out_dir=str(tmp_path / "callable"))
