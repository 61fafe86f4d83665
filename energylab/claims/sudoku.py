"""What chapters 8 and 9 state about the Sudoku runs (:mod:`energylab.experiments.sudoku`, its league, the 9×9 runs
on one CPU core and on one GPU, test-time voting): the chapters print these and the tests in ``tests/claims`` assert
them from the committed files under ``results/sudoku/``."""
from __future__ import annotations

from energylab.baselines import sudoku_rungs
from energylab.engine.results import Results
from energylab.engine.verdicts import compare, scaling
from energylab.tasks.sudoku_harness import load_set

__all__ = ["VOTE_MARGIN", "voting_claims", "PAPER_TRANSFORMER", "run_rungs", "below_propagation",
           "nine_by_nine_baselines",
           "nine_by_nine_claims", "board_se", "gpu_search_claims", "plateau_step", "gpu_league_claims",
           "search_voting_claims", "seed_values", "league_verdicts", "augmentation_claims"]

# AKOrN's paper (Miyato et al. 2025, Table 1 as chapter 9 quotes it): the looped Transformer at d = 512, trained on
# SATNet's boards, board accuracy in % on SATNet's test boards (ID) and on RRN's (OOD)
PAPER_TRANSFORMER = {"id": 98.6, "ood": 5.2}


def run_rungs(config: dict, sets=None) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`energylab.baselines.sudoku_rungs` on each test set of a Sudoku run's ``config`` (a Results.config), the
    run's own training boards as the reference: set -> rung -> {"board", "cell"}."""
    train = load_set(config["train_set"], "train", config["n_train"], config["size"], config["data_seed"])
    return {name: sudoku_rungs(load_set(name, "test", config["n_test"], config["size"], config["data_seed"]), train)
            for name in (sets or config["test_sets"])}


def below_propagation(boards: dict[tuple[str, int], float], baselines: dict) -> bool:
    """Whether every board accuracy in ``boards`` ((set, T) -> accuracy) is below what propagation alone solves
    of that set: the model has learnt no more than a solver that neither learns nor searches."""
    return all(v < baselines[s]["propagation"]["board"] for (s, _), v in boards.items())


def nine_by_nine_baselines(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`run_rungs` for the 9×9 run."""
    return run_rungs(results.config)


def nine_by_nine_claims(results: Results, baselines: dict, margin: float = 0.1) -> dict:
    """The chapter's statements about the run, as named booleans; ``baselines`` from :func:`nine_by_nine_baselines`.
    ``margin``: how far from a baseline a board accuracy must be to count (10 points; one seed, 1,000 boards a set,
    so one accuracy has a standard error of at most 1.6 points)."""
    cfg, f = results.config, results.final
    T, (id_set, *ood_sets) = cfg["iterations"], cfg["test_sets"]

    def board(name, t):
        return f[f"{name}/board@T{t}"]

    return {
        "it learns: SATNet-like boards solved at T, well above one elimination and the input-blind vote":
            board(id_set, T) > max(baselines[id_set][r]["board"] for r in ("blind", "one elimination")) + margin,
        "yet below propagation without search on every set, at every test T, by more than the margin":
            below_propagation({(s, t): board(s, t) + margin for s in cfg["test_sets"]
                               for t in cfg["test_iterations"]}, baselines),
        "in distribution, running 2T iterations solves more boards than T": board(id_set, 2 * T) > board(id_set, T),
        "out of distribution (RRN-like, RRN-17) it solves fewer boards than in distribution, at every test T":
            all(board(o, t) < board(id_set, t) for o in ood_sets for t in cfg["test_iterations"]),
        "out of distribution, running 4T iterations solves more boards than T, on both sets":
            all(board(o, 4 * T) > board(o, T) for o in ood_sets),
        "far below the paper's Transformer in distribution (98.6%)":
            100 * board(id_set, T) < PAPER_TRANSFORMER["id"] - 20,
    }


def augmentation_claims(augmented: Results, plain: Results, baselines: dict, search: Results, search_guess: float,
                        margin: float = 0.1) -> dict:
    """Chapter 9's statements about the augmented 9×9 run (``aug-cpu-9x9``) beside the same run without
    augmentation (``medium-cpu-9x9``, whose boards ``baselines`` scores), and about the augmented model on the boards
    that need search (``search``, with ``search_guess`` the cell accuracy of propagation then a uniform guess among
    each open cell's candidates on them, :func:`energylab.baselines.sudoku_propagation_guess`).
    ``margin`` as in :func:`nine_by_nine_claims`."""
    cfg, f, g = augmented.config, augmented.final, plain.final
    T, id_set = cfg["iterations"], cfg["test_sets"][0]
    t_plain = plain.config["iterations"]

    def fit_gap(results, t):  # training cells at the end minus test cells at T: how much it memorises
        return results.histories["seed0"].curves["cell"][-1] - results.final[f"{id_set}/cell@T{t}"]

    search_boards = [v for k, v in search.final.items() if "/board@" in k]
    search_cells = [v for k, v in search.final.items() if "/cell@" in k]
    return {
        "with augmentation it solves fewer SATNet-like boards at T than without it":
            f[f"{id_set}/board@T{T}"] + margin < g[f"{id_set}/board@T{t_plain}"],
        "it does not memorise: its training cells end within 5 points of its test cells at T, where the run without "
        "augmentation ends 10 points above them":
            fit_gap(augmented, T) < 0.05 and fit_gap(plain, t_plain) > 0.1,
        "below propagation without search on every set, at every test T, by more than the margin":
            below_propagation({(s, t): f[f"{s}/board@T{t}"] + margin for s in cfg["test_sets"]
                               for t in cfg["test_iterations"]}, baselines),
        "it solves under 1% of the boards that need search, at every test T": max(search_boards) < 0.01,
        "on those boards it gets fewer blank cells right, at every test T, than propagation followed by a uniform "
        "guess among each open cell's candidates, by more than 5 points":
            max(search_cells) + margin / 2 < search_guess,
    }


def board_se(p: float, n: int = 1000) -> float:
    """Standard error of a board accuracy ``p`` on ``n`` boards (binomial)."""
    return (p * (1 - p) / n) ** 0.5


def difference_se(p: float, n: int) -> float:
    """Standard error of the difference of two board accuracies on the same ``n`` boards, taken at the larger, ``p``
    (two independent binomials: an upper bound for paired runs)."""
    return (2 * p * (1 - p) / n) ** 0.5


def gpu_search_claims(gpu: Results, baselines: dict, search_guess: float, layer: str = "transformer-3e-3",
                      margin: float = 0.05) -> dict:
    """Chapter 9's statements about the looped Transformer at d = 256 trained with augmentation on one GPU
    (``results/sudoku/gpu-9x9-aug.json``, run ``layer``) beside propagation without search (``baselines``, the same
    boards: :func:`nine_by_nine_baselines` of the CPU run) and, on the boards that need search, propagation followed
    by a uniform guess (``search_guess``, cells). ``margin``: 5 points, three standard errors of a board accuracy on
    1,000 boards."""
    f, T = gpu.final, gpu.config["iterations"]
    id_set, *ood_sets = [s for s in gpu.config["test_sets"] if s != "9x9-search"]
    n = gpu.config["n_test"]

    def board(s, t):
        return f[f"{layer}/{s}/board@T{t}"]

    search4 = board("9x9-search", 4 * T)
    return {
        "it solves more than 80% of the SATNet-like boards at T, the goal the CPU runs missed": board(id_set, T) > 0.8,
        "in distribution, run to 4T, it draws level with propagation (within 3 points)":
            abs(board(id_set, 4 * T) - baselines[id_set]["propagation"]["board"]) < 0.03,
        "out of distribution it stays below propagation at every test T, by more than the margin":
            below_propagation({(s, t): board(s, t) + margin for s in ood_sets
                               for t in gpu.config["test_iterations"]}, baselines),
        "it solves boards that propagation cannot finish: at 4T, more than three standard errors above none":
            search4 - 3 * board_se(search4, n) > 0,
        "it solves them by running past its training depth: under 1% of them at T":
            board("9x9-search", T) < 0.01,
        "on those boards it gets more blank cells right at T than propagation followed by a guess, by more than "
        "the margin": f[f"{layer}/9x9-search/cell@T{T}"] > search_guess + margin,
    }


def plateau_step(history, level: float = 0.9) -> int | None:
    """The first logged step at which the training loss is below ``level`` times ln(n) (n = 9 digits: the loss of
    a uniform guess), or None: when a run leaves chance."""
    import math

    return next((s for s, v in zip(history.steps["loss"], history.curves["loss"]) if v < level * math.log(9)), None)


def gpu_league_claims(lr_runs: Results, runs: Results, margin: float = 0.5) -> dict:
    """Chapter 8's statements about Hyper-SET against the looped Transformer at 9×9, d = 256, on one GPU: the four
    runs at two learning rates (``results/sudoku/gpu-9x9-aug-lr.json``) and the two longer ones, each at its better
    rate (``gpu-9x9-aug.json``). ``margin``: the Transformer's lead in SATNet-like boards at T."""
    T = runs.config["iterations"]

    def board(res, run, t, s="satnet-like"):
        return res.final[f"{run}/{s}/board@T{t}"]

    pairs = [(lr_runs, "transformer-1e-3", "hyperset-1e-3"), (lr_runs, "transformer-3e-3", "hyperset-3e-3"),
             (runs, "transformer-3e-3", "hyperset-1e-3")]

    def leaves(res, run):
        return plateau_step(res.histories[f"{run}/seed0"])

    return {
        "at 3e-3 Hyper-SET does not leave chance: its training loss never falls below 90% of ln 9":
            leaves(lr_runs, "hyperset-3e-3") is None,
        "at 1e-3 it leaves chance at least three times later than every Transformer of the same call":
            all(leaves(res, "hyperset-1e-3") >= 3 * max(leaves(res, r.replace(":", "-")) for r in res.config["runs"]
                                                         if r.startswith("transformer"))
                for res in (lr_runs, runs)),
        "the Transformer solves more SATNet-like boards at T than Hyper-SET, by more than 50 points, in every pair":
            all(board(res, a, T) > board(res, b, T) + margin for res, a, b in pairs),
        "past its training depth Hyper-SET loses boards (2T below T) where the Transformer gains, longer run":
            board(runs, "hyperset-1e-3", 2 * T) < board(runs, "hyperset-1e-3", T)
            and board(runs, "transformer-3e-3", 2 * T) > board(runs, "transformer-3e-3", T),
    }


def search_voting_claims(voting: Results, depth: Results) -> dict:
    """Chapter 9's statements about voting with the 9×9 GPU Transformer on the boards that need search
    (``results/sudoku/voting-9x9-search.json``) and about one long run of it (``depth-9x9-search.json``, the same
    boards)."""
    n = voting.config["boards"]
    rows = voting.tables["voting"]

    def got(t, k, method):
        return next(r["board"] for r in rows if r["T"] == t and r["K"] == k and r["method"] == method)

    settings = [(t, k) for t, ks in voting.config["settings"] for k in ks]
    votes = [got(t, k, m) for t, k in settings for m in ("confidence", "majority", "any")]
    long = got(*settings[0], "plain@KT")  # one run of the same K·T iterations (the same for every setting)
    spread = difference_se(long, n)
    depths = sorted(int(k.split("@T")[1]) for k in depth.final if "/board@T" in k)
    curve = [depth.final[f"9x9-search/board@T{t}"] for t in depths]
    return {
        "one run of the same work solves more boards than any vote, by more than three standard errors":
            long - max(votes) > 3 * spread,
        "the perturbed starts end alike: at 4 runs of 4T even the oracle (any run) adds under 1 point to one run":
            all(got(t, k, "any") - got(t, k, "plain@T") < 0.01 for t, k in settings),
        "runs of the training depth T solve none of these boards, voted or not":
            all(got(t, k, m) == 0.0 for t, k in settings if t == min(t for t, _ in settings)
                for m in ("plain@T", "confidence", "majority", "any")),
        "the long run agrees with the vote file at the depth both measure":
            depth.final[f"9x9-search/board@T{settings[0][0] * settings[0][1]}"] == long,
        "past 4T, every doubling of the depth solves more boards": all(b > a for a, b in zip(curve[2:], curve[3:])),
    }


def cpu_league_claims(league: Results, search: Results, baselines: dict, margin: float = 0.1) -> dict:
    """Chapter 8's statements about the four layers at 9×9 on one CPU core with augmentation
    (``results/sudoku/aug-league-9x9.json``; ``search``: the same models on the boards that need search,
    ``aug-league-9x9-search.json``; ``baselines`` from :func:`run_rungs` of the league's config). ``margin``: 10
    points, as for the single 9×9 runs (one seed, 1,000 boards a set)."""
    cfg = league.config
    T, sets, layers, ts = cfg["iterations"], cfg["test_sets"], cfg["layers"], cfg["test_iterations"]

    def get(layer, s, key, t):
        return league.final[f"{layer}/{s}/{key}@T{t}"]

    blind = {s: baselines[s]["blind"]["cell"] for s in sets}
    return {
        "every layer stays below propagation without search, on every set at every test T, by more than the "
        "margin": below_propagation({(s, t): get(x, s, "board", t) + margin for x in layers for s in sets
                                     for t in ts}, baselines),
        "only the Transformer solves any board, under 5% of the SATNet-like ones at every test T":
            all(get(x, s, "board", t) == 0.0 for x in layers if x != "transformer" for s in sets for t in ts)
            and max(get("transformer", sets[0], "board", t) for t in ts) < 0.05,
        "no layer solves a board that needs search, at any test T":
            all(v == 0.0 for k, v in search.final.items() if "/board@T" in k),
        "ItrSA does not learn: its cells at T stay within 2 points of the input-blind vote on every set":
            all(abs(get("itrsa", s, "cell", T) - blind[s]) < 0.02 for s in sets),
        "AKOrN and Hyper-SET learn cells without boards: more than 25 points above the input-blind vote at T, "
        "on every set": all(get(x, s, "cell", T) > blind[s] + 0.25 for x in ("akorn", "hyperset") for s in sets),
        "past T, AKOrN and Hyper-SET lose cells (4T below T on every set), the Transformer keeps them (4T within "
        "a point of T or above)":
            all(get(x, s, "cell", 4 * T) < get(x, s, "cell", T) for x in ("akorn", "hyperset") for s in sets)
            and all(get("transformer", s, "cell", 4 * T) > get("transformer", s, "cell", T) - 0.01 for s in sets),
        "paper 004's order is reversed in cells: Hyper-SET below the Transformer at T on every set":
            all(get("hyperset", s, "cell", T) < get("transformer", s, "cell", T) for s in sets),
        "paper 003's order holds in cells: AKOrN above ItrSA at T on every set":
            all(get("akorn", s, "cell", T) > get("itrsa", s, "cell", T) for s in sets),
        "AKOrN's period-2 orbit: at most 2% of cells right at every odd test iteration, at least 20% at every even "
        "one, on every set": all(max(odd) <= 0.02 and min(even) >= 0.2 for odd, even in
                                 (_parity_cells(league, "akorn", s) for s in sets)),
    }


def _parity_cells(results: Results, layer: str, test_set: str) -> tuple[list[float], list[float]]:
    """A league layer's cells right at the odd and at the even iterations of its test-time curve."""
    curve = results.extra["layers"][layer]["test_time"][test_set]
    pairs = list(zip(curve["iterations"], curve["cell"]))
    return [c for t, c in pairs if t % 2], [c for t, c in pairs if t % 2 == 0]


def noise_voting_claims(noise: Results) -> dict:
    """Chapter 9's statements about the votes at larger noise on the boards that need search
    (``results/sudoku/voting-9x9-search-noise.json``: 4 runs of 4T at each σ, beside one run of 4T and one of 16T)."""
    n, rows = noise.config["boards"], noise.tables["voting"]

    def got(sigma, method):
        return next(r["board"] for r in rows if r["sigma"] == sigma and r["method"] == method)

    sigmas = noise.config["sigmas"]
    long = got(sigmas[0], "plain@KT")  # one run of the same K·T iterations, the same at every σ
    votes = [got(s, m) for s in sigmas for m in ("confidence", "majority", "any")]
    spread = difference_se(long, n)
    return {
        "at every noise, one run of the same work solves more boards than any vote, by more than three standard "
        "errors": long - max(votes) > 3 * spread,
        "even at the largest noise the oracle (any of the 4 runs right) adds at most 2 points to one run of 4T":
            all(got(s, "any") - got(s, "plain@T") <= 0.02 for s in sigmas),
        "the votes do not lose boards either: confidence and the oracle never below one run of 4T":
            all(got(s, m) >= got(s, "plain@T") for s in sigmas for m in ("confidence", "any")),
    }


def seed_values(results: Results, layer: str, test_set: str, iterations: int, key: str = "board",
                table: str = "test_time") -> list[float]:
    """One value per seed of ``layer`` on ``test_set`` at T = ``iterations`` from a league's ``table`` rows
    (``"test_time_clamped"``: Hyper-SET with the step sizes of t > T frozen at T's)."""
    return [r[key] for r in results.tables[table]
            if r["layer"] == layer and r["set"] == test_set and r["iterations"] == iterations]


def league_verdicts(results: Results) -> dict[str, str]:
    """The league's answers to the papers' Sudoku claims, each from the per-seed numbers (:func:`compare`,
    :func:`scaling`): Hyper-SET against the Transformer at T and 2T (paper 004), AKOrN against ItrSA (paper 003 /
    AKOrN), and test-time scaling of each layer from T to 2T and to 4T, on every test set."""
    cfg = results.config
    T, sets = cfg["iterations"], cfg["test_sets"]
    out = {}
    pairs = [(a, b) for a, b in (("hyperset", "transformer"), ("akorn", "itrsa")) if {a, b} <= set(cfg["layers"])]
    for s in sets:
        for k, t in (("T", T), ("2T", 2 * T)):
            for a, b in pairs:
                out[f"{a} vs {b}, {s} @{k}"] = compare(seed_values(results, a, s, t), seed_values(results, b, s, t))
        for layer in cfg["layers"]:
            for k, t in (("2T", 2 * T), ("4T", 4 * T)):
                out[f"{layer}, {s}, T -> {k}"] = scaling(seed_values(results, layer, s, T),
                                                         seed_values(results, layer, s, t))
    return out


# A vote "beats" or "hurts" only by more than two standard errors of a board accuracy on the 500 test boards
# (sqrt(0.25 / 500) = 0.022 at worst): a rerun with other noise could move smaller differences either way
VOTE_MARGIN = 0.045


def voting_claims(rows: dict[str, dict[str, float]], margin: float = VOTE_MARGIN) -> dict[str, list[str]]:
    """What chapter 9 states about test-time voting, from :func:`energylab.experiments.sudoku_voting.voting_rows`:
    the models where one long run (K·T iterations) beats every vote by more than ``margin``; where energy voting
    is below the plain run at T by more than ``margin``; where confidence voting beats both the plain run at T
    and the long run by more than ``margin``."""
    votes = ("energy", "confidence", "majority")
    return {
        "long_run_wins": [m for m, r in rows.items() if all(r["plain@KT"] > r[v] + margin for v in votes if v in r)],
        "energy_hurts": [m for m, r in rows.items() if "energy" in r and r["energy"] < r["plain@T"] - margin],
        "confidence_wins": [m for m, r in rows.items()
                            if r["confidence"] > max(r["plain@T"], r["plain@KT"]) + margin],
    }
