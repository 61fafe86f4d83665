"""Package the model of an earlier quick-profile Sudoku run (an ``energylab run`` folder) into energylab/pretrained/.

    python scripts/import_sudoku_run.py RUN_DIR [RUN_DIR ...]

The alternative to retraining with scripts/pretrain_sudoku.py when one CPU thread is not to be had for the
minutes a run takes: a run folder holds ``run.json`` (experiment, profile, config), ``results.json`` (its measured
accuracies) and ``seed0/checkpoint.pt`` (the trained model). It is accepted only if

* it is the sudoku experiment's quick profile and its config equals today's quick config for its layer in every
  field that shapes the model or its training (``device`` and ``progress`` may differ);
* the checkpoint, loaded into today's ``LoopedModel`` and evaluated on the committed test boards
  (energylab/pretrained/sudoku4-test.json, the quick profile's test boards) with the numerics pinned, solves the
  same boards as the run's own results.json says, at every test T, to within BOARD_SLACK boards (the run was not
  pinned: a near-tie between two digits may fall the other way).

The record then says so (``provenance``): where it came from, when it was trained, and both sets of numbers.
"""
from energylab import portable

portable.pin_environment()  # before torch loads, as in pretrain_sudoku.py

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretrain_sudoku import save  # noqa: E402

from energylab import experiments  # noqa: E402
from energylab.experiments import sudoku as sudoku_ex  # noqa: E402
from energylab.pretrained import TEST_BOARDS, accuracy, boards_dataset  # noqa: E402

FREE_FIELDS = {"device", "progress"}  # do not change what a CPU run computes
# fields added to the config after such a run, accepted when the run lacks them: a league's ``layers`` and
# ``layer_lr`` (empty for one layer) and ``n_trace`` (metrics traced after training, not stored in the model)
LATER_FIELDS = {"layers": [], "layer_lr": [], "n_trace": None}
BOARD_SLACK = 2


def import_run(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    if run["experiment"] != "sudoku" or run["profile"] != "quick":
        raise ValueError(f"{run_dir}: a sudoku quick run is needed, got {run['experiment']} {run['profile']}")
    layer = run["config"]["layer"]
    today = json.loads(json.dumps(dataclasses.asdict(experiments.get_config("sudoku", "quick", layer=layer))))
    differ = sorted(k for k in today if k not in FREE_FIELDS and today[k] != run["config"].get(k)
                    and not (k in LATER_FIELDS and k not in run["config"]
                             and LATER_FIELDS[k] in (None, today[k])))
    if differ:
        raise ValueError(f"{run_dir}: config differs from today's quick profile in {differ}")
    config = experiments.get_config("sudoku", "quick", layer=layer)
    checkpoint = os.path.join(run_dir, f"seed{config.seeds[0]}", "checkpoint.pt")
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
    model = sudoku_ex.make_model(config)
    model.load_state_dict(state)
    model.eval()
    measured = {s: accuracy(model, boards_dataset(s), config.test_iterations) for s in config.test_sets}
    for s in config.test_sets:
        n = len(boards_dataset(s))
        for t in config.test_iterations:
            got, then = measured[s][str(t)]["board"], results["final"][f"{s}/board@T{t}"]
            if abs(round(got * n) - round(then * n)) > BOARD_SLACK:
                raise ValueError(f"{run_dir}: today solves {got} of {s} at T={t}, the run recorded {then}")
    trained = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(checkpoint)))
    return save(model, {
        "name": f"sudoku4-{layer}",
        "model": dataclasses.asdict(model.config),
        "recipe": {"experiment": "sudoku", "profile": "quick", "overrides": {"layer": layer},
                   "config": run["config"], "steps": results["extra"]["steps"],
                   "parameters": results["extra"]["parameters"]},
        "test_boards": TEST_BOARDS,
        "accuracy": measured,
        "provenance": {
            "how": "imported by scripts/import_sudoku_run.py from a run of `energylab run sudoku --profile quick` "
                   "(one CPU thread, numerics not pinned), not retrained",
            "trained": trained,
            "run_accuracy": {k: v for k, v in results["final"].items() if "/board@" in k},
        },
    })


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    portable.configure_torch()
    if not argv:
        raise SystemExit(__doc__)
    for run_dir in argv:
        rec = import_run(run_dir)
        T = rec["model"]["iterations"]
        print(f"{rec['name']}: imported from {run_dir}; boards solved at T={T}: "
              + ", ".join(f"{s} {a[str(T)]['board']:.3f}" for s, a in rec["accuracy"].items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
