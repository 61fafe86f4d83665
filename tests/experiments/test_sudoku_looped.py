"""The looped model (energylab.models.looped), the Sudoku experiment (energylab.experiments.sudoku) and its harness
(energylab.tasks.sudoku_harness)."""
import dataclasses

import pytest
import torch

from energylab.experiments import EXPERIMENTS, get_config
from energylab.experiments import sudoku as X
from energylab.layers.registry import LAYERS, register_layer
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.tasks import sudoku as S
from energylab.tasks.sudoku_harness import load_set

TINY = X.Config(n_train=512, n_test=64, dim=32, heads=2, iterations=4, test_iterations=(2, 4, 8), epochs=10,
                batch_size=32, lr=1e-2, warmup_steps=10, n_eval=32, eval_every=64, device="cpu", progress=False)


def tokens_4x4(n=6, seed=0):
    return S.SudokuDataset(*S.generate(n, seed=seed, size=4)).tokens


def test_hooks_return_every_state_without_changing_the_output():
    torch.manual_seed(0)
    model = LoopedModel(LoopedConfig(size=4, dim=16, heads=2, iterations=5))
    tokens = tokens_4x4()
    before = dict(vars(model))
    with torch.no_grad():
        plain = model(tokens)
        logits, states = model(tokens, return_states=True)
        reads = model.readouts(tokens, at=(2, 5))
        norms = model.trace(tokens, 5, lambda t, x, c: (t, float(x.norm())))
    assert plain.shape == (6, 16, 4) and len(states) == 5 and all(s.shape == (6, 16, 16) for s in states)
    assert torch.equal(logits, plain) and torch.equal(reads[5], plain)
    assert torch.equal(reads[2], model(tokens, iterations=2).detach())
    assert [t for t, _ in norms] == [1, 2, 3, 4, 5]
    assert norms[-1][1] == pytest.approx(float(states[-1].norm()))
    assert dict(vars(model)).keys() == before.keys()  # forward stored nothing
    with pytest.raises(AttributeError, match="no energy"):
        model.energy(states[0])


def test_layer_registry_and_input_injection():
    class Decay(torch.nn.Module):  # x' = x/2 + c: a layer that uses the injected input
        def __init__(self, dim, heads, ffn_mult):
            super().__init__()

        def forward(self, x, c):
            return x / 2 + (0 if c is None else c)

        def energy(self, x, c):
            return (x ** 2).sum((1, 2))

    register_layer("decay-test", Decay)
    try:
        tokens = tokens_4x4(2)
        on = LoopedModel(LoopedConfig(size=4, dim=8, layer="decay-test", iterations=3))
        off = LoopedModel(LoopedConfig(size=4, dim=8, layer="decay-test", iterations=3, inject=False))
        off.load_state_dict(on.state_dict())
        c = on.inputs(tokens)
        _, s_on = on(tokens, return_states=True)
        _, s_off = off(tokens, return_states=True)
        assert torch.allclose(s_on[-1], c * (1 + 1 / 2 + 1 / 4 + 1 / 8)) and torch.allclose(s_off[-1], c / 8)
        assert on.energy(s_on[0]).shape == (2,)
    finally:
        del LAYERS["decay-test"]
    with pytest.raises(ValueError, match="registered layers: .*transformer"):  # other families may be registered
        LoopedModel(LoopedConfig(layer="nope"))
    block = LAYERS["transformer"](16, 4, 4)
    assert all(not n.endswith("bias") for n, _ in block.named_parameters())


def test_layers_that_take_the_step_get_t_and_x0():
    class Counter(torch.nn.Module):  # x' = x + t * x_0: after T steps x_T = x_0 (1 + T(T+1)/2)
        takes_step = True

        def __init__(self, dim, heads, ffn_mult):
            super().__init__()

        def forward(self, x, c, t, x0):
            return x + t * x0

    register_layer("counter-test", Counter)
    try:
        model = LoopedModel(LoopedConfig(size=4, dim=8, layer="counter-test", iterations=4, inject=False))
        tokens = tokens_4x4(3)
        _, states = model(tokens, return_states=True)
        x0 = model.inputs(tokens)
        assert [float((s / x0).mean()) for s in states] == pytest.approx([2.0, 4.0, 7.0, 11.0])
    finally:
        del LAYERS["counter-test"]


def test_the_registry_names_every_family_and_refuses_unknown_names():
    from energylab.layers import TransformerBlock, layer_builder

    with pytest.raises(ValueError, match="unknown layer 'fam-x'; registered layers: akorn, "):
        layer_builder("fam-x")
    assert layer_builder("transformer") is TransformerBlock


def test_registered_with_profiles():
    assert EXPERIMENTS["sudoku"] == "energylab.experiments.sudoku"
    assert {"quick", "medium", "full"} <= set(X.PROFILES) and set(X.PROFILES) == set(X.COST)
    quick = get_config("sudoku", "quick")
    assert quick.size == 4 and quick.iterations == 8 and quick.test_iterations == (4, 8, 16, 32)
    full = X.PROFILES["full"]
    assert (full.dim, full.heads, full.epochs, full.batch_size, full.iterations, len(full.seeds)) == (
        512, 8, 100, 100, 16, 5)
    hs = X.PROFILES["full-hyperset"]
    assert (hs.dim, hs.heads, hs.iterations, hs.epochs, hs.batch_size, hs.betas, hs.weight_decay, hs.lr) == (
        768, 12, 24, 200, 16, (0.9, 0.95), 0.1, 1e-4)
    with pytest.raises(ValueError, match="size=9"):
        load_set("4x4-id", "test", 10, 9)
    with pytest.raises(ValueError, match="unknown set"):
        load_set("nope", "test", 10, 4)


def test_trains_above_chance_with_a_test_time_table():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the number below is for one thread (160 steps, about 2 s; measured 0.96)
    try:
        results = X.run(TINY)
    finally:
        torch.set_num_threads(threads)
    rows = results.tables["test_time"]
    assert len(rows) == 1 * 2 * 3  # seeds x sets x test T
    assert {(r["set"], r["iterations"]) for r in rows} == {(s, t) for s in TINY.test_sets for t in (2, 4, 8)}
    curve = results.extra["test_time"]["4x4-id"]
    assert curve["iterations"] == list(range(1, 9)) and len(curve["board"]) == len(curve["cell"]) == 8
    assert curve["cell"][3] == results.final["4x4-id/cell@T4"] == [
        r["cell"] for r in rows if r["set"] == "4x4-id" and r["iterations"] == 4][0]
    cell = results.final["4x4-id/cell@T4"]
    assert cell > 0.5, cell  # chance on a blank is 1/4
    assert results.histories["seed0"].curves["eval/cell"][-1] == pytest.approx(
        [r["cell"] for r in rows if r["set"] == "4x4-id" and r["iterations"] == 4][0], abs=0.15)
    assert results.extra["givens"] == {"4x4-id": [6, 7, 8], "4x4-ood": [4, 5]}


def test_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch):
    config = dataclasses.replace(TINY, epochs=2, test_iterations=(4,), checkpoint_every=10)
    whole = X.run(config, out_dir=str(tmp_path / "whole"))
    real_train = X.train

    def interrupted(*args, **kwargs):
        def stop(model, step):
            if step == 15:
                raise KeyboardInterrupt
        return real_train(*args, after_step=stop, **kwargs)

    monkeypatch.setattr(X, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        X.run(config, out_dir=str(tmp_path / "cut"))
    assert torch.load(tmp_path / "cut" / "seed0" / "checkpoint.pt", weights_only=True)["step"] == 10
    monkeypatch.setattr(X, "train", real_train)
    resumed = X.run(config, out_dir=str(tmp_path / "cut"), resume=True)
    a, b = (torch.load(tmp_path / d / "seed0" / "checkpoint.pt", weights_only=True)["model"] for d in ("whole", "cut"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.tables == whole.tables


def test_committed_medium_cpu_run_shows_test_time_scaling():
    """results/sudoku/medium-cpu.json (6x6, looped Transformer, trained at T = 8): the numbers the book quotes."""
    from energylab.engine.committed import load_committed

    res, prov = load_committed("sudoku", "medium-cpu")
    assert res.config["size"] == 6 and res.config["iterations"] == 8 and res.config["layer"] == "transformer"
    f = res.final
    assert round(f["6x6-id/board@T8"], 3) == 0.866 and round(f["6x6-id/board@T32"], 3) == 0.918
    assert round(f["6x6-ood/board@T8"], 3) == 0.233 and round(f["6x6-ood/board@T32"], 3) == 0.461
    ood = [f[f"6x6-ood/board@T{t}"] for t in (4, 8, 16, 32)]
    assert ood == sorted(ood) and ood[-1] > 1.9 * ood[1]  # running the loop 4x longer doubles OOD boards solved
    assert prov["seconds"] < 30 * 60  # the medium-cpu budget: one CPU core, under 30 minutes


def test_score_run_reads_a_finished_run_without_training(tmp_path):
    import dataclasses

    from energylab.experiments import sudoku as S

    cfg = dataclasses.replace(S.PROFILES["quick"], epochs=1, n_train=128, n_test=40, progress=False, n_trace=0,
                              ema=0.9, device="cpu", test_sets=("4x4-id",))
    done = S.run(cfg, out_dir=str(tmp_path / "run"))
    again = S.score_run(cfg, str(tmp_path / "run"), ("4x4-id", "4x4-ood"))
    assert again.final["4x4-id/board@T8"] == done.final["4x4-id/board@T8"]  # the same (averaged) model
    assert "4x4-ood/board@T8" in again.final and again.histories["seed0"].curves == {}
    with pytest.raises(ValueError, match="has not finished"):
        S.score_run(dataclasses.replace(cfg, epochs=2), str(tmp_path / "run"), ("4x4-ood",))


def test_score_run_scores_every_layer_of_a_finished_league(tmp_path):
    """A league's config: each layer's run (out_dir/<layer>, at its own learning rate) scored and merged, the same
    numbers as the league's own evaluation."""
    import dataclasses

    from energylab.experiments import sudoku as S

    cfg = dataclasses.replace(S.PROFILES["quick"], epochs=1, n_train=64, n_test=20, progress=False, n_trace=0,
                              device="cpu", test_sets=("4x4-id",), layers=("transformer", "itrsa"),
                              layer_lr=("itrsa=0.001",))
    assert {k: c.lr for k, c in S.league_configs(cfg).items()} == {"transformer": cfg.lr, "itrsa": 0.001}
    done = S.run(cfg, out_dir=str(tmp_path / "league"))
    again = S.score_run(cfg, str(tmp_path / "league"), ("4x4-id", "4x4-ood"))
    for layer in cfg.layers:
        assert again.final[f"{layer}/4x4-id/board@T8"] == done.final[f"{layer}/4x4-id/board@T8"]
        assert f"{layer}/4x4-ood/cell@T8" in again.final
    assert {r["layer"] for r in again.tables["league"]} == set(cfg.layers)
