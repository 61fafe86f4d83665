"""Every claim chapter 8 (section 8.7) makes about the committed medium run (results/hyperset/medium.json: 11 image
models x 3 seeds), through the verdicts the chapter prints (``experiments.hyperset.verdicts``: per-seed comparisons),
the numbers it quotes, and a replay of the run's first epoch with the library as it is now."""
import dataclasses

import pytest

from energylab.engine.committed import load_committed
from energylab.experiments import hyperset


@pytest.fixture(scope="module")
def medium():
    return load_committed("hyperset", "medium")


def test_the_file_is_the_medium_profile_from_a_clean_commit(medium):
    results, provenance = medium
    cfg = hyperset.PROFILES["medium"]
    assert tuple(results.config["layers"]) == cfg.layers and len(cfg.layers) == 11
    assert tuple(results.config["seeds"]) == cfg.seeds == (0, 1, 2)
    assert (results.config["dim"], results.config["iterations"], results.config["epochs"]) == (64, 8, 25)
    assert results.extra["steps"] == 500 and not provenance["dirty"]
    assert len(results.tables["accuracy"]) == 11 * 3 * 2


def test_verdicts_the_chapter_states(medium):
    v = hyperset.verdicts(medium[0])
    assert v["transformer vs hyperset @T"] == "not separated"
    assert v["hyperset-sigmoid vs hyperset @T"] == "ahead"
    assert v["hyperset-linear vs hyperset @T"] == v["hyperset-fixed0.5 vs hyperset @T"] == "behind"
    for other in ("softmaxff", "gatedff", "fixed0.1", "lora2", "lora4", "lora8"):
        assert v[f"hyperset-{other} vs hyperset @T"] == "not separated", other
    assert all(v[f"{layer}, T -> 2T"] == "falls" for layer in medium[0].config["layers"])
    assert v["hyperset: attention along t = 1..T"] == "rises"
    assert v["hyperset: effective_rank along t = 1..T"] == v["hyperset: average_angle along t = 1..T"] == "mixed"


def test_numbers_the_chapter_quotes(medium):
    results = medium[0]
    f, n = results.final, results.extra["parameters"]
    assert (n["hyperset"], n["transformer"]) == (26944, 51392) and n["hyperset"] / n["transformer"] < 0.55
    assert (round(f["hyperset@T8"], 3), round(f["hyperset@T8/std"], 3)) == (0.967, 0.013)
    assert (round(f["transformer@T8"], 3), round(f["transformer@T8/std"], 3)) == (0.975, 0.005)
    assert round(f["hyperset-sigmoid@T8"], 3) == 0.983 and results.extra["baseline"] == 0.08
    drop = {layer: f[f"{layer}@T8"] - f[f"{layer}@T16"] for layer in results.config["layers"]}
    assert drop["transformer"] < 0.01
    learned = [layer for layer in drop if layer not in ("transformer", "hyperset-linear", "hyperset-fixed0.1",
                                                         "hyperset-fixed0.5")]
    assert max(drop[layer] for layer in learned) <= 0.025 and 0.10 < drop["hyperset-linear"] < 0.15
    assert 0.43 < min(drop["hyperset-fixed0.1"], drop["hyperset-fixed0.5"]) and max(
        drop["hyperset-fixed0.1"], drop["hyperset-fixed0.5"]) < 0.56
    assert round(drop["hyperset"], 3) == 0.014


def test_dynamics_the_chapter_quotes(medium):
    m = medium[0].extra["metrics"]
    h, s = m["hyperset"], m["hyperset-sigmoid"]
    T = medium[0].config["iterations"]
    attn_half = sum(h["attention_mid"][t] - h["attention"][t - 1] for t in range(1, T + 1))
    ff_half = sum(h["attention"][t] - h["attention_mid"][t] for t in range(1, T + 1))
    assert attn_half > ff_half > 0  # E_ATTN rises, here mostly in the attention halves
    assert (round(attn_half), round(ff_half)) == (72, 43)
    assert (round(h["average_angle"][0], 1), round(h["average_angle"][T], 1)) == (89.4, 81.4)
    assert s["attention"][0] > s["attention"][1] > s["attention"][2] > s["attention"][3] < s["attention"][4]
    assert (round(s["attention"][0]), round(s["attention"][3])) == (1192, 1136)
    assert (round(s["average_angle"][0], 1), round(max(s["average_angle"]), 1)) == (91.0, 92.9)


def test_the_step_sizes_of_the_committed_run_were_free_to_depend_on_t(medium):
    """The rerun trained with only the outer step-size map zero-initialised (the fix): its image models condition
    on x_t, so a replay of the first epoch with the library as it is now must match the committed loss."""
    results = medium[0]
    cfg = dataclasses.replace(hyperset.PROFILES["medium"], layers=("hyperset",), seeds=(0,), epochs=1,
                              test_iterations=(8,), progress=False, device="cpu")
    replay = hyperset.run(cfg)  # 20 steps, all inside the 20-step warm-up: independent of the number of epochs
    got = replay.histories["hyperset"].curves["loss"]  # one seed: the layer's name alone
    want = results.histories["hyperset/seed0"].curves["loss"][:1]
    assert len(got) == 1 and abs(got[0] - want[0]) <= 1e-5, (got, want)
