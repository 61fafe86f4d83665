"""Bring a committed table's seed spreads to the book's one convention: `python scripts/recompute_spreads.py [--check]`.

The book states one convention for a ``_std`` over seeds, :func:`energylab.engine.results.seed_spread` (the sample
standard deviation, ddof = 1). Before it, ``energylab.experiments.forms.summarize`` used the population standard
deviation, so ``results/forms/quick.json``'s summary (the Atlas's table, section 11.5) differs from the other
committed tables by a factor sqrt(3/2) at three seeds. Its per-seed rows are in the same file (``tables["runs"]``), so
the spreads are recomputed from them without rerunning anything; means, parameters and time ratios are left as they
were. The file's provenance gains an ``amended`` entry saying what changed, when and by which command, and
:func:`energylab.engine.committed.describe_provenance` prints it in every caption of the file.

With --check nothing is written; the exit status is 1 if a spread is not the convention's.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from energylab.engine.results import seed_spread  # noqa: E402
from energylab.engine.runs import write_json  # noqa: E402

FILES = {"results/forms/quick.json": ("runs", "summary", ("cell", "board"))}
WHAT = "seed spreads recomputed as sample standard deviations (ddof = 1), the book's one convention"


def stale(data: dict, runs: str, summary: str, keys: tuple[str, ...]) -> list[tuple[int, str, float]]:
    """(row index, column, wanted value) for every spread of ``summary`` that is not seed_spread of ``runs``."""
    out = []
    for i, row in enumerate(data["tables"][summary]):
        mine = [r for r in data["tables"][runs] if r["layer"] == row["layer"]]
        for k in keys:
            mean, std = seed_spread(r[k] for r in mine)
            if abs(mean - row[k]) > 1e-12:
                raise ValueError(f"{row['layer']}: the summary's {k} mean is not its runs' mean")
            if row[f"{k}_std"] != std:
                out.append((i, f"{k}_std", std))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a spread is stale")
    args = parser.parse_args(argv)
    found = 0
    for name, (runs, summary, keys) in FILES.items():
        path = ROOT / name
        data = json.loads(path.read_text(encoding="utf-8"))
        todo = stale(data, runs, summary, keys)
        found += len(todo)
        print(f"{name}: {len(todo)} spread(s) to recompute")
        if todo and not args.check:
            for i, column, value in todo:
                data["tables"][summary][i][column] = value
            data["provenance"].setdefault("amended", []).append(
                {"date": datetime.date.today().isoformat(), "what": WHAT,
                 "command": "python scripts/recompute_spreads.py"})
            write_json(str(path), data)  # the committed files' own layout
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
