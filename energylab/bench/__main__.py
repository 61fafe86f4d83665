"""``python -m energylab.bench [section ...] [--quick] [--json PATH]``: run benchmark sections, print tables."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from energylab.bench import SECTIONS, format_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m energylab.bench", description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"sections to run (default: all): {', '.join(SECTIONS)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a smoke run)")
    parser.add_argument("--json", default=None, help="also write all rows as JSON to this path")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {unknown}; valid: {sorted(SECTIONS)}")
    results = {}
    for name in args.sections or list(SECTIONS):
        module = importlib.import_module(f"energylab.bench.{SECTIONS[name]}")
        print(f"\n== {name} ==", flush=True)
        rows = module.run(quick=args.quick)
        print(format_table(rows), flush=True)
        results[name] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
