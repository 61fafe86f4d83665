"""Train the league's quick-profile 4x4 Sudoku models once and save them under energylab/pretrained/.

    python scripts/pretrain_sudoku.py [layer ...]        (default: transformer hyperset itrsa akorn)

Each model is exactly the one ``energylab run sudoku --profile quick --layer <layer>`` trains (seed 0, one CPU
thread, the numerics pinned by :mod:`energylab.portable`). For each we write

* ``sudoku4-<layer>.pt``: the state_dict (float32; loadable with ``torch.load(weights_only=True)``);
* ``sudoku4-<layer>.json``: the model config, the training recipe, the board and cell accuracy measured on the
  committed test boards at every test T, the commit, the machine and the time it took;

and once ``sudoku4-test.json``: the test boards (puzzles and solutions of 4x4-id and 4x4-ood) the accuracies were
measured on, so that ``tests/models/test_pretrained.py`` and the book's page read the very same boards.
"""
from energylab import portable

portable.pin_environment()  # before torch loads: the ATen/MKL kernels must not depend on this processor

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from energylab import experiments  # noqa: E402
from energylab.experiments import sudoku as sudoku_ex  # noqa: E402
from energylab.pretrained import DIRECTORY, TEST_BOARDS, accuracy, boards_dataset, file_sha256  # noqa: E402
from energylab.tasks.sudoku_harness import load_set  # noqa: E402

LAYERS = ("transformer", "hyperset", "itrsa", "akorn")


def git_commit() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                           capture_output=True, text=True).stdout.strip()
    return sha + ("+dirty" if dirty else "")


def save_test_boards(config) -> None:
    """The quick profile's test boards, as digit strings (row-major, 0 = blank)."""
    out = {}
    for name in config.test_sets:
        ds = load_set(name, "test", config.n_test, config.size, config.data_seed)
        out[name] = {"puzzles": ["".join(map(str, p.ravel())) for p in ds.puzzles],
                     "solutions": ["".join(map(str, s.ravel())) for s in ds.solutions]}
    with open(os.path.join(DIRECTORY, TEST_BOARDS), "w") as f:
        json.dump({"size": config.size, "data_seed": config.data_seed, "sets": out}, f, separators=(",", ":"))


def pretrain(layer: str) -> dict:
    config = experiments.get_config("sudoku", "quick", layer=layer, progress=False, device="cpu")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        results = sudoku_ex.run(config, out_dir=tmp)
        seed = config.seeds[0]
        state = torch.load(os.path.join(tmp, f"seed{seed}", "checkpoint.pt"), map_location="cpu",
                           weights_only=True)["model"]
    seconds = time.perf_counter() - t0
    model = sudoku_ex.make_model(config)
    model.load_state_dict(state)
    model.eval()
    measured = {name: accuracy(model, boards_dataset(name), config.test_iterations) for name in config.test_sets}
    # the reloaded model on the saved boards must give the experiment's own numbers, to the last board
    for name in config.test_sets:
        for t in config.test_iterations:
            got, want = measured[name][str(t)]["board"], results.final[f"{name}/board@T{t}"]
            if got != want:
                raise RuntimeError(f"{layer}: reloaded model solves {got} of {name} at T={t}, the run said {want}")
    return save(model, {
        "name": f"sudoku4-{layer}",
        "model": dataclasses.asdict(model.config),
        "recipe": {"experiment": "sudoku", "profile": "quick", "overrides": {"layer": layer},
                   "config": dataclasses.asdict(config), "steps": results.extra["steps"],
                   "parameters": results.extra["parameters"],
                   "final_loss": round(results.histories[f"seed{seed}"].last("loss"), 6),
                   # the training loss per 50-step window: tests/models/test_pretrained.py replays the first window
                   "loss": {"steps": results.histories[f"seed{seed}"].steps["loss"],
                            "values": results.histories[f"seed{seed}"].curves["loss"]}},
        "test_boards": TEST_BOARDS,
        "accuracy": measured,
    }, train_seconds=round(seconds, 1))


def save(model, record: dict, **extra) -> dict:
    """Write ``model``'s weights as ``<record name>.pt`` and the record, completed with the commit, numerics,
    machine and date of this process (and ``extra``), as ``<record name>.json`` in the package; return it."""
    weights = os.path.join(DIRECTORY, record["name"] + ".pt")
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, weights)
    record = {**record, "commit": git_commit(),  # the commit that trained or imported and measured it
              "numerics": {"pinned": portable.PINNED_ENV, "torch_threads": torch.get_num_threads(),
                           "torch": torch.__version__},
              "machine": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d"), **extra,
              "sha256": file_sha256(weights)}  # pretrained.load verifies the weights against it
    with open(os.path.join(DIRECTORY, record["name"] + ".json"), "w") as f:
        json.dump(record, f, indent=1)
    return record


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    portable.configure_torch()
    layers = argv or list(LAYERS)
    unknown = sorted(set(layers) - set(LAYERS))
    if unknown:
        raise SystemExit(f"unknown layer(s) {unknown}; choose from {LAYERS}")
    save_test_boards(experiments.get_config("sudoku", "quick"))
    for layer in layers:
        rec = pretrain(layer)
        T = rec["model"]["iterations"]
        print(f"{rec['name']}: {rec['recipe']['parameters']:,d} parameters, {rec['train_seconds']} s, boards solved at "
              f"T={T}: " + ", ".join(f"{s} {a[str(T)]['board']:.3f}" for s, a in rec["accuracy"].items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
