"""Every claim chapters 8 and 9 make about the committed Sudoku league (results/sudoku/league-6x6.json: 4 looped layers
x 3 seeds at 6x6) and its probes (league-6x6-probes.json), through ``energylab.claims.sudoku.league_verdicts`` (per-seed
comparisons, the function the chapters call) and the numbers they quote; and a replay of the first 50 steps of every
layer."""
import dataclasses

import pytest

from energylab.claims import sudoku as sudoku_claims
from energylab.engine.committed import load_committed
from energylab.experiments import sudoku
from energylab.tasks import sudoku_harness as harness


@pytest.fixture(scope="module")
def league():
    return load_committed("sudoku", "league-6x6")


def _mean(results, layer, s, t, table="test_time"):
    v = sudoku_claims.seed_values(results, layer, s, t, table=table)
    return sum(v) / len(v)


def test_the_file_is_the_league_profile_from_a_clean_commit(league):
    results, provenance = league
    cfg = sudoku.PROFILES["league-6x6"]
    assert tuple(results.config["layers"]) == cfg.layers and tuple(results.config["seeds"]) == (0, 1, 2)
    assert results.extra["steps"] == 4200 and not provenance["dirty"]
    assert len(results.tables["test_time"]) == 4 * 3 * 2 * 4


def test_verdicts_the_chapters_state(league):
    v = sudoku_claims.league_verdicts(league[0])
    for s in ("6x6-id", "6x6-ood"):
        for k in ("T", "2T"):
            assert v[f"hyperset vs transformer, {s} @{k}"] == "behind"
            assert v[f"akorn vs itrsa, {s} @{k}"] == "behind"
        for k in ("2T", "4T"):
            assert v[f"transformer, {s}, T -> {k}"] == "rises"
            assert v[f"hyperset, {s}, T -> {k}"] == v[f"akorn, {s}, T -> {k}"] == "falls"
    assert v["itrsa, 6x6-ood, T -> 2T"] == v["itrsa, 6x6-ood, T -> 4T"] == v["itrsa, 6x6-id, T -> 2T"] == "rises"
    assert v["itrsa, 6x6-id, T -> 4T"] == "mixed"


def test_numbers_the_chapters_quote(league):
    r = league[0]
    quoted = {("transformer", "6x6-id", 8): 0.948, ("hyperset", "6x6-id", 8): 0.864, ("hyperset", "6x6-id", 16): 0.110,
              ("transformer", "6x6-ood", 8): 0.385, ("transformer", "6x6-ood", 16): 0.594,
              ("transformer", "6x6-ood", 32): 0.647, ("hyperset", "6x6-ood", 8): 0.165,
              ("hyperset", "6x6-ood", 16): 0.014, ("itrsa", "6x6-id", 8): 0.775, ("itrsa", "6x6-id", 16): 0.865,
              ("itrsa", "6x6-ood", 8): 0.077, ("itrsa", "6x6-ood", 16): 0.272, ("itrsa", "6x6-ood", 32): 0.311,
              ("akorn", "6x6-id", 8): 0.599, ("akorn", "6x6-ood", 8): 0.020, ("akorn", "6x6-ood", 16): 0.010}
    for (layer, s, t), value in quoted.items():
        assert round(_mean(r, layer, s, t), 3) == value, (layer, s, t)
    n = {layer: r.extra["layers"][layer]["parameters"] for layer in r.config["layers"]}
    assert round(n["hyperset"] / n["transformer"], 2) == 0.77


def test_freezing_the_step_sizes_past_t_does_not_rescue_hyperset(league):
    r = league[0]
    for s in ("6x6-id", "6x6-ood"):
        assert _mean(r, "hyperset", s, 8, "test_time_clamped") == _mean(r, "hyperset", s, 8)  # same up to T
        assert _mean(r, "hyperset", s, 16, "test_time_clamped") < _mean(r, "hyperset", s, 8) / 2


def test_the_probes(league):
    probes, provenance = load_committed("sudoku", "league-6x6-probes")
    assert not provenance["dirty"] and tuple(probes.config["seeds"]) == (0,)
    assert round(_mean(probes, "hyperset-zeroinit", "6x6-id", 8), 3) == 0.655
    assert round(_mean(probes, "hyperset-inject", "6x6-id", 8), 3) == 0.179
    for layer in ("hyperset-zeroinit", "hyperset-inject"):
        for s in ("6x6-id", "6x6-ood"):
            assert _mean(probes, layer, s, 16) < max(_mean(probes, layer, s, 8) / 2, 0.01)


def test_hyperset_energies_along_the_iterations(league):
    m = league[0].extra["layers"]["hyperset"]["metrics"]
    a, ang = m["attention"], m["average_angle"]
    assert a[0] > a[1] > a[2] < a[3] and ang[1] > ang[0]  # the paper's direction for the first steps only
    assert (round(a[0], 1), round(a[2], 1), round(a[8], 1), round(a[16], 1), round(a[32], 1)) == (
        3175.6, 3091.9, 3409.6, 3858.9, 3955.5)
    assert (round(ang[0], 1), round(ang[1], 1), round(ang[16], 1), round(ang[32])) == (80.5, 85.3, 40.5, 34)
    assert (round(m["feedforward"][0], 1), round(m["feedforward"][8], 1)) == (-1322.7, -1950.1)
    r = m["effective_rank"]
    assert max(range(9), key=a.__getitem__) == 6 and round(a[6], 1) == 3426.1 and a[6] > a[7] > a[8]  # peak at 6
    assert all(ang[t] > ang[t + 1] for t in range(1, 8))  # the angle falls at every step from the second on
    assert min(range(9), key=r.__getitem__) == 5 and r[5] < r[6] < r[7] < r[8] < r[0]  # falls, climbs back part way


def test_sudoku_league_replays_its_first_50_steps_for_every_layer(league):
    results = league[0]
    profile = sudoku.PROFILES["league-6x6"]
    train_data = harness.load_set(profile.train_set, "train", profile.n_train, profile.size, profile.data_seed)
    for layer in results.config["layers"]:
        # inside the 200-step warm-up, so the same whatever the length of the run: the first 50-step loss window
        cfg = dataclasses.replace(profile, layers=(), layer=layer, eval_every=0, progress=False, device="cpu")
        _, got = sudoku.train_seed(cfg, 0, train_data, steps=50)
        want = results.histories[f"{layer}/seed0"]
        assert cfg.warmup_steps >= 50 and got.steps["loss"] == want.steps["loss"][:1] == [50]
        assert abs(got.curves["loss"][0] - want.curves["loss"][0]) <= 1e-4, layer


def test_no_model_of_the_league_beats_propagation_without_search(league):
    """Chapter 8, "What a solver that learns nothing gives": every layer, every seed, every set and test T is below
    what propagation alone solves, and propagation solves nearly every 6x6 board (the 4x4 sets: the quick profile)."""
    results, _ = league
    base = sudoku_claims.run_rungs(results.config)
    seeds = {(r["set"], r["iterations"], r["layer"], r["seed"]): r["board"] for r in results.tables["test_time"]}
    assert sudoku_claims.below_propagation({(s, t): v for (s, t, _, _), v in seeds.items()}, base)
    assert all(base[s]["propagation"]["board"] > 0.95 for s in base)
    assert all(base[s]["blind"]["board"] == 0.0 and base[s]["one elimination"]["board"] < 0.01 for s in base)
    quick = sudoku.PROFILES["quick"]
    small = sudoku_claims.run_rungs(dataclasses.asdict(quick))
    assert all(small[s]["propagation"]["board"] > 0.95 for s in quick.test_sets)


def test_the_gpu_run_at_9x9_is_below_propagation_too():
    results, provenance = load_committed("sudoku", "gpu-9x9-d256")
    assert "H200" in provenance["machine"]["gpu"]
    base = sudoku_claims.run_rungs(results.config)
    boards = {(r["set"], r["iterations"]): r["board"] for r in results.tables["test_time"]}
    assert sudoku_claims.below_propagation(boards, base)


def test_chapter_9_states_the_givens_of_its_4x4_sets_as_the_generator_draws_them():
    import json
    import pathlib

    from energylab.tasks.sudoku_generate import ID_GIVENS, OOD_GIVENS

    nb = json.loads((pathlib.Path(__file__).parents[2] / "notebooks" / "09_jacobians.ipynb").read_text())
    text = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    (a, b), (c, d) = ID_GIVENS[4], OOD_GIVENS[4]
    assert f"The ID set has {a}–{b} givens and the OOD set {c}–{d}" in " ".join(text.split())
    from energylab.experiments import recurrent

    assert recurrent.PROFILES["quick"].size == 4 and recurrent.PROFILES["quick"].test_sets == ("4x4-id", "4x4-ood")


def _markdown(chapter: str) -> str:
    import json
    import pathlib

    nb = json.loads((pathlib.Path(__file__).parents[2] / "notebooks" / chapter).read_text())
    return " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").split())


def test_chapter_8_states_the_quick_profile_and_the_medium_run_time_as_they_are():
    """The text quotes them as computed numbers (energylab.notebook.prose): the roles are in place and the chapter's
    printed table holds the profile's and the provenance's values."""
    import json
    import pathlib

    from energylab.notebook import prose

    quick = sudoku.PROFILES["quick"]
    steps = quick.epochs * (quick.n_train // quick.batch_size)
    text = _markdown("08_hyperset.ipynb")
    row = ("4×4 generated boards, {eval}`N.quick_train` train, "
           f"$d={quick.dim}$, $T={quick.iterations}$, " + "{eval}`N.quick_steps` steps")
    assert row in text
    assert "{eval}`N.md_minutes` minutes of one CPU core" in text
    nb = json.loads((pathlib.Path(__file__).parents[2] / "notebooks" / "08_hyperset.ipynb").read_text())
    table = prose.table_of(nb)
    _, provenance = load_committed("hyperset", "medium")
    assert table["quick_train"] == f"{quick.n_train:,d}" and table["quick_steps"] == f"{steps:,d}"
    assert table["md_minutes"] == f"{provenance['seconds'] / 60:.1f}"
