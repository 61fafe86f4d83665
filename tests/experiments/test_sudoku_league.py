"""The Sudoku league (papers 003/004): the league harness merges per-layer runs, each resumable on its own. (That
every looped layer learns at the quick profile is tests/models/test_pretrained.py's: the packaged models are the quick
profile's runs, replayed there.)"""
import shutil

import pytest
import torch

from energylab.experiments import get_config, run_experiment
from energylab.experiments import sudoku as X

FOUR = ("transformer", "itrsa", "akorn", "hyperset")


def _tiny(**kw):
    base = dict(n_train=96, n_test=24, epochs=2, batch_size=32, seeds=(0, 1), iterations=2, test_iterations=(1, 2),
                eval_every=0, warmup_steps=1, checkpoint_every=3, n_trace=8, progress=False, device="cpu")
    return {**base, **kw}


def test_league_merges_seed_means_and_std_and_traces_hyperset(tmp_path):
    res = run_experiment("sudoku", "quick", out_dir=str(tmp_path / "a"),
                         **_tiny(layers=("transformer", "hyperset"), test_sets=("4x4-id",)))
    rows = res.tables["test_time"]
    for row in res.tables["league"]:
        same = [r for r in rows if r["layer"] == row["layer"] and r["iterations"] == row["iterations"]]
        vals = torch.tensor([r["cell"] for r in same], dtype=torch.float64)
        assert row["seeds"] == 2 and row["cell"] == pytest.approx(float(vals.mean()), abs=1e-12)
        assert row["cell_std"] == pytest.approx(float(vals.std()), abs=1e-12)  # sample std, ddof = 1
        assert res.final[f"{row['layer']}/4x4-id/cell@T{row['iterations']}"] == row["cell"]
    metrics = res.extra["layers"]["hyperset"]["metrics"]
    assert res.extra["layers"]["transformer"]["metrics"] is None
    assert len(metrics["attention"]) == len(metrics["attention_mid"]) == 3 and len(metrics["per_seed"]) == 2
    assert set(res.histories) == {f"{layer}/seed{s}" for layer in ("transformer", "hyperset") for s in (0, 1)}


def test_a_layer_trained_in_one_league_is_reused_by_another(tmp_path):
    kw = _tiny(test_sets=("4x4-id",))
    alone = run_experiment("sudoku", "quick", out_dir=str(tmp_path / "one"), layers=("itrsa",), **kw)
    shutil.copytree(tmp_path / "one" / "itrsa", tmp_path / "both" / "itrsa")
    both = run_experiment("sudoku", "quick", out_dir=str(tmp_path / "both"), resume=True,
                          layers=("itrsa", "transformer"), **kw)
    assert both.final["itrsa/4x4-id/cell@T2"] == alone.final["itrsa/4x4-id/cell@T2"]
    assert both.histories["itrsa/seed0"].curves == alone.histories["itrsa/seed0"].curves


def test_league_profile_is_the_issue_protocol():
    cfg = get_config("sudoku", "league-6x6")
    assert cfg.layers == FOUR and len(cfg.seeds) >= 3 and cfg.size == 6
    assert cfg.test_iterations == (cfg.iterations // 2, cfg.iterations, 2 * cfg.iterations, 4 * cfg.iterations)
    assert cfg.lr == X.LEAGUE_LR == get_config("sudoku", "quick").lr


def test_layer_lr_overrides_per_layer_and_checks_its_entries():
    assert X.layer_lrs(X.Config(layer_lr=("hyperset=0.003", "itrsa=1e-3"))) == {"hyperset": 0.003, "itrsa": 0.001}
    for bad in (("hyperset",), ("hyperset=fast",), ("hyperset=-1",)):
        with pytest.raises(ValueError, match="layer_lr"):
            X.layer_lrs(X.Config(layer_lr=bad))
