"""Test-time voting for looped Sudoku models: K perturbed starts per board, combined three ways (issue 51).

A trained :class:`~energylab.models.looped.LoopedModel` is deterministic: x_0 = c, the embedded board, for every
layer (the AKOrN-style Kuramoto layer included: the reference code starts from random oscillators, ours from c,
normalised per oscillator). So the K runs of a board differ by their start only:

    run 0:        x_0 = c                               the model's own start (K = 1 is the plain model)
    run k >= 1:   x_0 = c + σ · rms(c) · ε_k,  ε_k ~ N(0, I)   rms over the d channels of each token

with ``sigma`` (σ, default :data:`SIGMA`) relative to the size of the tokens, ε drawn from a ``torch.Generator``
seeded with ``seed`` (chunk after chunk: the noise depends on ``seed`` and ``chunk``). The board c is still
injected at every iteration, unperturbed. Each run iterates T times; the K readouts are combined by

* **energy** voting: the run whose final state has the lowest layer energy (AKOrN's voting). Only for layers
  with an energy (:func:`final_energy`): Hyper-SET's E_ATTN + E_FF (``layer.energy``) and the Kuramoto layer's
  pseudo-energy −Tr(XᵀY), Y = C + MSA(X) (:func:`energylab.jacobians.pseudo_energy`, what AKOrN's code votes
  with); None for the Transformer and ItrSA;
* **confidence** voting: the run whose mean max-softmax probability over the blanks is highest;
* **majority**: per cell, the digit most of the K argmax predictions give (ties: run 0's digit if it is tied,
  else the smallest);

and ``any`` (an oracle, not a method) counts a board solved if one of the K runs solves it. Each is compared with
the same model run once from x_0 = c for T and for K·T iterations: **work per board** = K × T layer applications
for voting, the same K·T for the long single run.

:func:`voting_table` measures a model on a dataset; :func:`voting_4x4` the packaged 4×4 models
(``energylab.pretrained``) on their committed test boards, written by :func:`commit_voting_4x4` to
``results/sudoku/voting-4x4.json`` with provenance.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from energylab._checks import check_int, check_interval
from energylab.engine.results import Results
from energylab.jacobians import pseudo_energy
from energylab.layers.recurrent import KuramotoLayer, oscillator_normalize
from energylab.models.looped import LoopedModel
from energylab.tasks.sudoku import SudokuDataset, sudoku_counts
from energylab.tasks.sudoku_harness import load_set, test_time

SIGMA = 0.1  # noise of the perturbed starts, relative to the tokens' rms (see the module docstring)
METHODS = ("plain@T", "plain@KT", "energy", "confidence", "majority", "any")


def has_energy(model: LoopedModel) -> bool:
    """Does the model's layer expose an energy that :func:`final_energy` can vote with?"""
    return hasattr(model.layer, "energy") or isinstance(model.layer, KuramotoLayer)


def final_energy(model: LoopedModel, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor | None:
    """The layer energy of states x (B, N, d) given the embedded boards c (B, N, d) -> (B,), or None if the layer
    has none: ``model.energy`` (Hyper-SET) or, for the Kuramoto layer, the pseudo-energy of the normalised state."""
    if hasattr(model.layer, "energy"):
        return model.energy(x, c)
    if isinstance(model.layer, KuramotoLayer):
        xn = oscillator_normalize(x, model.layer.n)
        return pseudo_energy(xn, model.layer.drive(xn, c if model.config.inject else None))
    return None


def perturbed_starts(c: torch.Tensor, k: int, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """K starts for boards embedded as c (B, N, d) -> (K, B, N, d): start 0 is c itself, start j >= 1 is
    c + σ · rms(c) · ε_j (rms over d, per token; ε_j standard normal drawn from ``generator``)."""
    rms = c.pow(2).mean(-1, keepdim=True).sqrt()  # (B, N, 1)
    noise = torch.randn((k - 1, *c.shape), generator=generator, dtype=c.dtype, device="cpu").to(c.device)
    return torch.cat([c[None], c[None] + sigma * rms[None] * noise], 0)


@torch.no_grad()
def vote_runs(model: LoopedModel, tokens: torch.Tensor, k: int, iterations: int, sigma: float = SIGMA,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logits (K, B, N, n) after ``iterations`` from each of the K starts, final energies (K, B) or None)."""
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    B = len(tokens)
    c = model.inputs(tokens)
    starts = perturbed_starts(c, k, sigma, generator).flatten(0, 1)  # (K·B, N, d)
    many = tokens.repeat(k, 1)  # (K·B, N): run-major, as the starts
    logits, states = model(many, iterations, return_states=True, start=starts)
    energy = final_energy(model, states[-1], c.repeat(k, 1, 1))
    return logits.unflatten(0, (k, B)), None if energy is None else energy.unflatten(0, (k, B))


def pick_lowest(energy: torch.Tensor) -> torch.Tensor:
    """The run with the lowest energy for each board: (K, B) -> (B,) (ties: the first run)."""
    return energy.argmin(0)


def combine(logits: torch.Tensor, mask: torch.Tensor, energy: torch.Tensor | None = None) -> dict:
    """Predictions (B, N) class indices by each voting rule from K runs' logits (K, B, N, n) with the blanks
    mask (B, N): {"energy" (None without energies), "confidence", "majority"}."""
    K, B = logits.shape[:2]
    preds = logits.argmax(-1)  # (K, B, N)
    rows = torch.arange(B, device=logits.device)

    def chosen(run):  # (B,) run per board -> (B, N)
        return preds[run, rows]

    blanks = mask.to(logits.dtype)
    conf = (F.softmax(logits, -1).amax(-1) * blanks).sum(-1) / blanks.sum(-1).clamp(min=1)  # (K, B)
    n = logits.shape[-1]
    votes = F.one_hot(preds, n).sum(0).to(logits.dtype) + 0.5 * F.one_hot(preds[0], n)  # run 0 breaks ties
    return {"energy": None if energy is None else chosen(pick_lowest(energy)),
            "confidence": chosen(conf.argmax(0)), "majority": votes.argmax(-1)}


@torch.no_grad()
def voting_table(model: LoopedModel, data: SudokuDataset, ks=(1, 4, 16), iterations: int | None = None,
                 sigma: float = SIGMA, seed: int = 0, chunk: int = 250) -> list[dict]:
    """Board and cell accuracy (blanks only, exact counts) of every method of :data:`METHODS` at every K in ``ks``:
    one row per (K, method) with ``work`` = layer applications per board (T for plain@T, K·T otherwise) and the
    seconds the K runs took; energy rows only for layers with an energy. ``iterations``: T (default the model's
    training T)."""
    T = model.config.iterations if iterations is None else check_int("iterations", iterations, minimum=1)
    sigma = check_interval("sigma", sigma, 0)
    if not ks or any(check_int("ks", k, minimum=1) != k for k in ks):
        raise ValueError(f"ks must hold positive ints, got {ks!r}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rows = []
    for k in ks:
        generator = torch.Generator().manual_seed(seed)
        counts: dict[str, list[int]] = {m: [0, 0] for m in METHODS}  # right cells, solved boards
        started = time.perf_counter()
        for i in range(0, len(data), chunk):
            tokens, target, mask = (t[i:i + chunk].to(device) for t in (data.tokens, data.target, data.mask))
            logits, energy = vote_runs(model, tokens, k, T, sigma, generator)
            preds = combine(logits, mask, energy)
            long = model.readouts(tokens, (T, k * T))
            preds.update({"plain@T": long[T].argmax(-1), "plain@KT": long[k * T].argmax(-1)})
            for m, pred in preds.items():
                if pred is not None:
                    right, _, solved = sudoku_counts(pred, target, mask)
                    counts[m][0] += right
                    counts[m][1] += solved
            solved = ((logits.argmax(-1) == target) | ~mask).all(-1)  # (K, B)
            counts["any"][1] += int(solved.any(0).sum())
        seconds = time.perf_counter() - started
        blanks = int(data.mask.sum())
        for m in METHODS:
            if m == "energy" and not has_energy(model):
                continue
            rows.append({"K": k, "T": T, "method": m, "work": T if m == "plain@T" else k * T,
                         "board": counts[m][1] / len(data), "cell": None if m == "any" else counts[m][0] / blanks,
                         "seconds": round(seconds, 2)})
    model.train(was_training)
    return rows


PRETRAINED = ("sudoku4-transformer", "sudoku4-itrsa", "sudoku4-akorn", "sudoku4-hyperset")


def voting_4x4(ks=(1, 4, 16), sigmas=(SIGMA, 0.3), seed: int = 0, models=PRETRAINED,
               sets=("4x4-id", "4x4-ood")) -> Results:
    """:func:`voting_table` for the packaged 4×4 models on their committed test boards (500 per set; T = 8, the
    training T) at every noise σ in ``sigmas``: ``tables["voting"]`` one row per (model, set, σ, K, method);
    ``extra["seconds"]`` the wall-clock time of each (model, set, σ)."""
    from energylab import pretrained

    results = Results("sudoku", {"ks": list(ks), "sigmas": list(sigmas), "seed": seed, "models": list(models),
                                 "sets": list(sets), "boards": "energylab.pretrained.boards_dataset"})
    rows, seconds = [], {}
    for name in models:
        model = pretrained.load(name)
        for s in sets:
            for sigma in sigmas:
                started = time.perf_counter()
                for row in voting_table(model, pretrained.boards_dataset(s), ks, sigma=sigma, seed=seed):
                    rows.append({"model": name, "set": s, "sigma": sigma, **row})
                seconds[f"{name}/{s}/sigma={sigma}"] = round(time.perf_counter() - started, 1)
    results.tables["voting"] = rows
    for row in rows:
        key = f"{row['model']}/{row['set']}/sigma={row['sigma']}/{row['method']}@K{row['K']}/board"
        results.final[key] = row["board"]
    results.extra.update(seconds=seconds, work="K x T layer applications per board (plain@T: T)")
    return results


def _commit(name: str, make, entry: str, overwrite: bool, kwargs: dict) -> str:
    """Run ``make(**kwargs)`` and write it with provenance to ``results/sudoku/<name>.json`` (refusing to replace a
    committed file unless ``overwrite``); the recorded command calls ``entry`` of this module. Returns the path."""
    from energylab.engine.committed import check_not_committed, commit_results, committed_path, source_commit

    check_not_committed(committed_path("sudoku", name), overwrite)
    source, started = source_commit(), time.perf_counter()
    results = make(**kwargs)
    return commit_results(results, "sudoku", name, seconds=time.perf_counter() - started, source=source,
                          overwrite=overwrite,
                          command=f"python -c 'from energylab.experiments.sudoku_voting import {entry}; {entry}()'")


def search_boards(n_boards: int) -> SudokuDataset:
    """The first ``n_boards`` of the 1,000 boards that need search (``9x9-search``)."""
    data = load_set("9x9-search", "test", 1000, 9)
    return SudokuDataset(data.puzzles[:n_boards], data.solutions[:n_boards])


def commit_voting_4x4(overwrite: bool = False, **kwargs) -> str:
    """Run :func:`voting_4x4` and write it with provenance to ``results/sudoku/voting-4x4.json``; return the path."""
    return _commit("voting-4x4", voting_4x4, "commit_voting_4x4", overwrite, kwargs)


GPU_RUN = "gpu-9x9-aug"  # the committed 9×9 run whose Transformer's weights are kept beside it
GPU_WEIGHTS = "gpu-9x9-aug-transformer.pt"  # results/sudoku/: its state dict (the weights' moving average)
SEARCH_SETTINGS = ((64, (4,)), (16, (16,)))  # (T, ks): 4 runs of 4T and 16 runs of T, 256 iterations per board


def gpu_transformer() -> LoopedModel:
    """The looped Transformer of the committed GPU run ``gpu-9x9-aug`` (9×9, d = 256, trained with augmentation
    on an H100; chapter 9), on the CPU in evaluation mode, from ``results/sudoku/gpu-9x9-aug-transformer.pt``."""
    import dataclasses
    import os

    from energylab.engine.committed import ROOT
    from energylab.experiments import sudoku

    config = dataclasses.replace(sudoku.PROFILES["medium"], layer="transformer")
    model = sudoku.make_model(config)
    model.load_state_dict(torch.load(os.path.join(ROOT, "sudoku", GPU_WEIGHTS), map_location="cpu",
                                     weights_only=True))
    return model.eval()


def voting_search(n_boards: int = 500, settings=SEARCH_SETTINGS, seed: int = 0, sigmas=(SIGMA,)) -> Results:
    """:func:`voting_table` for :func:`gpu_transformer` on the first ``n_boards`` boards that need search
    (``9x9-search``), at each (T, ks) of ``settings`` and each noise σ of ``sigmas``: one row per (σ, T, K, method)
    in ``tables["voting"]``; ``final`` keys carry σ where more than one was run."""
    data = search_boards(n_boards)
    model = gpu_transformer()
    config = {"run": GPU_RUN, "weights": GPU_WEIGHTS, "set": "9x9-search", "boards": n_boards,
              "settings": [[t, list(ks)] for t, ks in settings], "seed": seed}
    config.update({"sigma": sigmas[0]} if len(sigmas) == 1 else {"sigmas": list(sigmas)})
    results = Results("sudoku", config)
    rows = []
    for sigma in sigmas:
        for t, ks in settings:
            rows += [{"set": "9x9-search", "sigma": sigma, **row}
                     for row in voting_table(model, data, ks, iterations=t, sigma=sigma, seed=seed)]
    results.tables["voting"] = rows
    for row in rows:
        noise = "" if len(sigmas) == 1 else f"sigma={row['sigma']}/"
        results.final[f"{noise}T{row['T']}/{row['method']}@K{row['K']}/board"] = row["board"]
    return results


def commit_voting_search(overwrite: bool = False, **kwargs) -> str:
    """Run :func:`voting_search` and write it with provenance to ``results/sudoku/voting-9x9-search.json``."""
    return _commit("voting-9x9-search", voting_search, "commit_voting_search", overwrite, kwargs)


NOISE_SIGMAS = (0.3, 1.0)  # larger perturbations than SIGMA: do runs that start further apart end apart?


def commit_voting_noise(overwrite: bool = False, **kwargs) -> str:
    """:func:`voting_search` at the larger noises of :data:`NOISE_SIGMAS`, 4 runs of 4T on the first 250 boards
    that need search, written with provenance to ``results/sudoku/voting-9x9-search-noise.json``."""
    kwargs = {"n_boards": 250, "settings": SEARCH_SETTINGS[:1], "sigmas": NOISE_SIGMAS, **kwargs}
    return _commit("voting-9x9-search-noise", voting_search, "commit_voting_noise", overwrite, kwargs)


DEPTHS = (16, 32, 64, 128, 256, 512, 1024)  # test iterations of the depth curve (T = 16 trained)


def depth_search(n_boards: int = 500, depths=DEPTHS) -> Results:
    """:func:`gpu_transformer` run once, long, on the first ``n_boards`` boards that need search: board and cell
    accuracy after each number of iterations in ``depths`` (one pass, read out along the way), in ``final`` as
    ``9x9-search/board@T<t>`` and ``.../cell@T<t>``: how far test-time depth alone goes, beside the votes."""
    data = search_boards(n_boards)
    results = Results("sudoku", {"run": GPU_RUN, "weights": GPU_WEIGHTS, "set": "9x9-search", "boards": n_boards,
                                 "depths": list(depths)})
    for t, acc in test_time(gpu_transformer(), data, tuple(depths), chunk=250).items():
        results.final[f"9x9-search/board@T{t}"] = acc["board"]
        results.final[f"9x9-search/cell@T{t}"] = acc["cell"]
    return results


def commit_depth_search(overwrite: bool = False, **kwargs) -> str:
    """Run :func:`depth_search` and write it with provenance to ``results/sudoku/depth-9x9-search.json``."""
    return _commit("depth-9x9-search", depth_search, "commit_depth_search", overwrite, kwargs)


def voting_rows(results, test_set: str, sigma: float, k: int) -> dict[str, dict[str, float]]:
    """model -> method -> board accuracy, from a committed voting result (``tables["voting"]``) at one set, σ and
    K (plain@T is the K = 1 run)."""
    out: dict[str, dict[str, float]] = {}
    for row in results.tables["voting"]:
        if row["set"] == test_set and row["sigma"] == sigma and (row["K"] == k or row["method"] == "plain@T"):
            if row["method"] == "plain@T" and row["K"] != 1:
                continue
            out.setdefault(row["model"], {})[row["method"]] = row["board"]
    return out


def voting_markdown(results, test_set: str, sigma: float, k: int) -> str:
    """The table of :func:`voting_rows`: one row per model, one column per method (– where a layer has no energy)."""
    rows = voting_rows(results, test_set, sigma, k)
    head = ["model", "one run at T", f"one run at {k}T", "energy vote", "confidence vote", "majority",
            "any run (oracle)"]
    keys = ["plain@T", "plain@KT", "energy", "confidence", "majority", "any"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, got in rows.items():
        lines.append(f"| `{model}` | " + " | ".join(f"{got[key]:.3f}" if key in got else "–" for key in keys) + " |")
    return "\n".join(lines)


__all__ = ["voting_rows", "voting_markdown", "SIGMA", "METHODS", "PRETRAINED", "has_energy", "final_energy",
           "perturbed_starts", "vote_runs",
           "pick_lowest", "combine", "voting_table", "voting_4x4", "commit_voting_4x4", "GPU_RUN", "GPU_WEIGHTS",
           "SEARCH_SETTINGS", "gpu_transformer", "search_boards", "voting_search", "commit_voting_search", "DEPTHS",
           "depth_search", "commit_depth_search"]
