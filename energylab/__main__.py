"""Command line: train an experiment at any profile, or list them.

    python -m energylab list
    python -m energylab run <experiment> --profile quick|full --device auto|cpu|cuda --out DIR [--resume]
                                         [--set field=value ...]
    torchrun --nproc_per_node=K -m energylab run <experiment> ...   # DistributedDataParallel, one GPU per rank

``run`` writes checkpoints and ``DIR/results.json``; a notebook reads the latter with
``energylab.experiments.load_or_run(name, profile, out_dir=DIR)``.
"""
from __future__ import annotations

import argparse
import ast
import sys


def _parse_override(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--set expects field=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw  # a plain string such as attention=EA
    return key.strip(), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m energylab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="experiments, their profiles and estimated cost")
    run = sub.add_parser("run", help="train an experiment")
    run.add_argument("experiment")
    run.add_argument("--profile", default="quick", help="quick (laptop CPU) or full (the paper's scale)")
    run.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, ...")
    run.add_argument("--out", default=None, help="output folder (default: results/<experiment>-<profile>)")
    run.add_argument("--resume", action="store_true", help="continue from the checkpoints in --out")
    run.add_argument("--set", dest="overrides", action="append", default=[], type=_parse_override,
                     metavar="FIELD=VALUE", help="override a Config field (repeatable), e.g. --set epochs=500")
    args = parser.parse_args(argv)

    from energylab import experiments  # after argparse: `--help` stays fast

    try:
        if args.command == "list":
            from energylab.bench import format_table

            print(format_table(experiments.describe()))
            return 0
        from energylab.train import init_distributed

        rank, world = init_distributed()
        overrides = dict(args.overrides)
        overrides["device"] = args.device
        out = args.out or f"results/{args.experiment}-{args.profile}"
        results = experiments.run_experiment(args.experiment, args.profile, out_dir=out, resume=args.resume,
                                             **overrides)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if rank == 0:
        print(f"results written to {out}/results.json (world size {world})")
        for key, value in results.final.items():
            print(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
