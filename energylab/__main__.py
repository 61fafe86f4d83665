"""Command line: train an experiment at any profile, or list them.

    python -m energylab list [--long]
    python -m energylab run <experiment> --profile PROFILE --device auto|cpu|cuda
                            --out DIR [--resume] [--set field=value ...] [--commit [NAME]]
    torchrun --nproc_per_node=K -m energylab run <experiment> ...   # DDP, one GPU per rank

``list`` shows each experiment's chapter, profiles (its ``PROFILES``: every experiment has
quick and full) and cost. ``run`` writes ``DIR/run.json`` (experiment and config), checkpoints
and, when it has finished, ``DIR/results.json``; a notebook reads the latter with
``energylab.experiments.load_or_run(name, profile, out_dir=DIR, **overrides)``. A fresh run
refuses a DIR that already holds a run; ``--resume`` continues one only under the same config.
Errors (bad values, divergence, Ctrl-C) print one line ``error: ...`` to stderr and exit
non-zero (2: bad input, 1: training diverged, 130: interrupted); results.json is then not
written, checkpoints already written are kept (and named), and a run that saved nothing leaves
no folder behind.

``--commit`` also writes the results, with the machine, date, git commit and wall-clock time,
to ``results/<experiment>/<NAME>.json`` (NAME defaults to the profile): the committed
medium/full results a chapter shows beside its live quick run (:mod:`energylab.engine.committed`).
"""
from __future__ import annotations

import argparse
import ast
import sys
import time


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
    try:
        return _main(argv)
    except KeyboardInterrupt:  # outside the run itself (imports, printing); the run has its own handler
        return _fail("interrupted", 130)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m energylab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="experiments, their chapter, profiles and estimated cost")
    listing.add_argument("experiment", nargs="?", default=None, help="only this experiment")
    listing.add_argument("--long", action="store_true", help="also each experiment's description")
    run = sub.add_parser("run", help="train an experiment")
    run.add_argument("experiment")
    run.add_argument("--profile", default="quick", help="one of the experiment's profiles, as `list` shows them "
                     "(quick: a laptop CPU; full: the paper's scale)")
    run.add_argument("--device", default=None, help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, ... (default: auto); "
                     "--set device=... is the same setting and is honoured when --device is not given (both, "
                     "naming different devices, are refused)")
    run.add_argument("--out", default=None, help="output folder (default: results/<experiment>-<profile>); "
                     "a fresh run refuses a folder that already holds a run")
    run.add_argument("--resume", action="store_true", help="continue the run in --out (same experiment, profile "
                     "and --set values; --device may differ), or start it if --out holds none")
    run.add_argument("--set", dest="overrides", action="append", default=[], type=_parse_override,
                     metavar="FIELD=VALUE", help="override a Config field (repeatable), e.g. --set epochs=500")
    run.add_argument("--threads", type=int, default=None, metavar="N",
                     help="CPU threads for torch (default: torch's own choice; 1 reproduces the book's notebooks)")
    run.add_argument("--commit", nargs="?", const="", default=None, metavar="NAME",
                     help="also write results/<experiment>/<NAME>.json with provenance (NAME: the profile)")
    run.add_argument("--force", action="store_true", help="with --commit: replace an existing committed file")
    run.add_argument("--unpinned", action="store_true",
                     help="with --commit: keep this processor's own kernels (a committed CPU run otherwise uses the "
                     "pinned numerics of energylab.portable, so that its replay test passes on every x86-64 machine)")
    args = parser.parse_args(argv)
    if args.command == "run" and args.commit is not None and not args.unpinned:
        try:
            _pin_numerics(args)
        except ValueError as err:
            return _fail(str(err), 2)

    from energylab import experiments  # after argparse: `--help` stays fast
    from energylab.engine.train import TrainingDiverged

    out = None if args.command == "list" else (args.out or f"results/{args.experiment}-{args.profile}")
    try:
        if args.command == "list":
            rows = experiments.describe()
            if args.experiment is not None:
                rows = [r for r in rows if r["experiment"] == args.experiment]
                if not rows:
                    raise ValueError(f"unknown experiment {args.experiment!r}; `python -m energylab list` names them")
            print(format_listing(rows, long=args.long))
            return 0
        from energylab.engine.train import init_distributed

        if args.command == "run" and args.threads is not None:
            if args.threads < 1:
                raise ValueError(f"--threads must be >= 1, got {args.threads}")
            import torch

            torch.set_num_threads(args.threads)
        from energylab import portable

        portable.configure_torch()  # pinned (a committed run): no oneDNN either; otherwise a no-op
        rank, world = init_distributed()
        overrides = dict(args.overrides)
        overrides["device"] = _device(args.device, overrides.get("device"))
        started = time.perf_counter()
        if args.force and args.commit is None:
            raise ValueError("--force only applies to --commit")
        if args.commit is not None:
            from energylab.engine.committed import check_not_committed, committed_path, source_commit

            # refuse before training, not after: a committed run took long to make
            check_not_committed(committed_path(args.experiment, args.commit or args.profile), args.force)
            if args.resume:
                _check_resumed_numerics(out)
            source = source_commit()  # the code this run starts from (the tree may change while it trains)
        results = experiments.run_experiment(args.experiment, args.profile, out_dir=out, resume=args.resume,
                                             **overrides)
    except ValueError as err:
        return _fail(str(err), 2)
    except TrainingDiverged as err:
        return _fail(f"training diverged: {err}; {_left_behind(out)}", 1)
    except KeyboardInterrupt:
        return _fail(f"interrupted; {_left_behind(out)}", 130)
    if rank == 0:
        print(f"results written to {out}/results.json (world size {world})")
        if args.commit is not None:
            from energylab.engine.committed import commit_results

            command = " ".join(["python -m energylab", *(sys.argv[1:] if argv is None else argv)])
            try:
                path = commit_results(results, args.experiment, args.commit or args.profile, command=command,
                                      seconds=time.perf_counter() - started, source=source, overwrite=args.force)
            except ValueError as err:  # written meanwhile by another run: this run's results stay in out
                return _fail(f"{err}; this run's results are in {out}/results.json", 2)
            print(f"committed results written to {path}")
        for key, value in results.final.items():
            print(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    return 0


def _pin_numerics(args) -> None:
    """Pin the CPU numerics (:mod:`energylab.portable`) for a committed run, before torch loads: its kernels read
    the variables once. Training amplifies the last-bit differences between processors' kernels (N2T5's held-out
    accuracy moved by 0.03 within 100 epochs between AVX-512 and AVX2 kernels), so an unpinned run's replay test
    would pass only on the processor that made it."""
    from energylab import portable

    if "torch" in sys.modules and portable.unpinned():
        raise ValueError("--commit needs the pinned numerics set before torch is imported: run it as "
                         "`python -m energylab run ... --commit` in a fresh process, or pass --unpinned")
    if args.threads not in (None, 1):
        raise ValueError(f"--commit runs on one thread (the pinned numerics), got --threads {args.threads}; "
                         f"pass --unpinned to commit a multi-threaded run")
    portable.pin_environment()
    args.threads = 1


def _device(flag: str | None, overridden) -> object:
    """The run's device: ``--device``, else ``--set device=...``, else auto; ValueError if the two disagree (one
    of them would otherwise be dropped silently)."""
    if flag is not None and overridden is not None and str(overridden) != flag:
        raise ValueError(f"--device {flag} and --set device={overridden} disagree: give the device once")
    return flag if flag is not None else ("auto" if overridden is None else overridden)


def _check_resumed_numerics(out: str) -> None:
    """``--resume --commit``: the committed provenance states this process's numerics (pinned or not, its thread
    count), so every segment already trained in ``out`` must have run under the same ones (run.json records them)."""
    import os

    from energylab.engine.runs import MANIFEST, process_numerics, read_json

    path = os.path.join(out, MANIFEST)
    if not os.path.exists(path):
        return  # nothing trained yet: this run starts fresh under these numerics
    recorded = read_json(path).get("numerics")
    now = process_numerics()
    if not isinstance(recorded, list) or not recorded or any(segment != now for segment in recorded):
        was = "not recorded" if not isinstance(recorded, list) or not recorded else "; ".join(
            f"{s.get('numerics')}, {s.get('torch_threads')} thread(s)" for s in recorded if isinstance(s, dict))
        raise ValueError(f"--resume --commit: the run in {out} was trained under other numerics ({was}) than this "
                         f"process's ({now['numerics']}, {now['torch_threads']} thread(s)), so its results cannot be "
                         f"committed as made under them; commit a fresh run (--commit with a new --out), or resume "
                         f"without --commit")


LIST_WIDTH = 100  # a terminal's columns that `list` keeps to


def format_listing(rows: list[dict], long: bool = False, width: int = LIST_WIDTH) -> str:
    """``describe()`` rows as lines of at most ``width`` characters: experiment, chapter number, profile, cost.

    Every profile with its whole cost, wrapped under the cost column (a reader wants all of it); the long form
    also puts each experiment's description under its name.
    """
    import textwrap

    from energylab.experiments import chapter_number

    name_w = max(len("experiment"), *(len(r["experiment"]) for r in rows)) if rows else len("experiment")
    prof_w = max(len("profile"), *(len(r["profile"]) for r in rows)) if rows else len("profile")
    chap_w = len("chapter")
    indent = name_w + chap_w + prof_w + 6
    room = width - indent
    head = f"{'experiment'.ljust(name_w)}  {'chapter'.ljust(chap_w)}  {'profile'.ljust(prof_w)}  cost"
    lines = [head + ("" if long else "  (--long: with descriptions)"), "-" * min(width, indent + room)]
    shown = None
    for r in rows:
        chapter = str(chapter_number(r["chapter"]))
        first = f"{r['experiment'].ljust(name_w)}  {chapter.rjust(len('chapter'))}  {r['profile'].ljust(prof_w)}  "
        cost = " ".join(str(r["cost"]).split())
        if long and r["experiment"] != shown and r.get("about"):
            shown = r["experiment"]
            lines += textwrap.wrap(f"{r['about']} (notebooks/{r['chapter']}.ipynb)", width,
                                   initial_indent=f"{r['experiment']}: ",
                                   subsequent_indent=" " * (len(r["experiment"]) + 2), break_on_hyphens=False)
        wrapped = textwrap.wrap(cost, room, break_on_hyphens=False) or [""]
        lines.append(first + wrapped[0])
        lines += [" " * indent + part for part in wrapped[1:]]
    return "\n".join(lines)


def _fail(message: str, code: int) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)  # one line
    return code


def _left_behind(out: str) -> str:
    """What a failed run left in ``out``: no results.json; the checkpoints kept, if any."""
    import os

    from energylab.engine.runs import CHECKPOINT, run_files

    kept = run_files(out, (CHECKPOINT,)) if os.path.isdir(out) else []
    if not kept:
        return "nothing was saved"
    return (f"results.json not written; {len(kept)} checkpoint(s) kept under {out} ({', '.join(kept[:3])}"
            f"{', ...' if len(kept) > 3 else ''})")


if __name__ == "__main__":
    sys.exit(main())
