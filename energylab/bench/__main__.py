"""``python -m energylab.bench [section ...] [--quick] [--json PATH] [--commit]``: run benchmark sections, print tables.

``--commit`` also writes each section's rows to ``results/bench/<section>.json`` with the machine, date and git
commit (:mod:`energylab.engine.committed`): the Atlas shows each form's cost ratio from there, with where it was
measured.

``--capability avx2`` (or ``avx512``, ``default``) measures with PyTorch's CPU kernels built for that instruction
set, as a reader whose processor has no more would get them: the run restarts itself with ``ATEN_CPU_CAPABILITY``
set (ATen reads it once, at its first CPU kernel), and with ``avx2`` ``MKL_ENABLE_INSTRUCTIONS=AVX2`` (MKL's
matrix products would otherwise keep the processor's AVX-512). Every CPU row records the instruction set its
kernels used (``capability``) and MKL's (``mkl``: ``default`` when unrestricted), and
with ``--capability`` the committed file is ``results/bench/<section>-<processor family>-<capability>.json``
(e.g. ``attention-intel-avx512``), so the results of several processors and instruction sets sit side by side.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
import time

from energylab.bench import SECTIONS, format_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m energylab.bench", description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"sections to run (default: all): {', '.join(SECTIONS)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a smoke run)")
    parser.add_argument("--json", default=None, help="also write all rows as JSON to this path")
    parser.add_argument("--commit", action="store_true",
                        help="also write results/bench/<section>.json with machine, date and commit")
    parser.add_argument("--device", default=None, help="device for sections that take one (attention): cpu, cuda")
    parser.add_argument("--dtype", default=None, help="dtype for sections that take one (attention): float32, bfloat16")
    parser.add_argument("--tokens", default=None, type=lambda s: tuple(int(n) for n in s.split(",")),
                        help="token counts for sections that take them (attention), e.g. 256,4096")
    parser.add_argument("--capability", default=None, choices=CAPABILITIES,
                        help="instruction set of PyTorch's CPU kernels (ATEN_CPU_CAPABILITY): avx2, avx512, default")
    args = parser.parse_args(argv)
    if args.capability and os.environ.get("ATEN_CPU_CAPABILITY") != args.capability:
        # ATen chose its kernels at the first CPU op of this process: measure in a fresh one
        from energylab import kernels

        env = {**os.environ, "ATEN_CPU_CAPABILITY": args.capability,
               "TORCHINDUCTOR_CACHE_DIR": kernels.inductor_cache_dir(args.capability)}  # see there
        env.pop("MKL_ENABLE_INSTRUCTIONS", None)
        if args.capability in MKL_INSTRUCTIONS:  # the matrix products too, not only ATen's own kernels
            env["MKL_ENABLE_INSTRUCTIONS"] = MKL_INSTRUCTIONS[args.capability]
        own = sys.argv[1:] if argv is None else list(argv)
        return subprocess.run([sys.executable, "-m", "energylab.bench", *own], env=env).returncode
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {unknown}; valid: {sorted(SECTIONS)}")
    if (args.device or "cpu") == "cpu":
        import torch

        # every CPU section measures on one thread (energylab.bench); pinning the process as well makes the
        # committed provenance record the thread count the rows were measured with
        torch.set_num_threads(1)
    results = {}
    if args.commit:
        from energylab.engine.committed import commit_results, source_commit
        from energylab.engine.results import Results

        source = source_commit()  # the code the benchmark starts from
    for name in args.sections or list(SECTIONS):
        module = importlib.import_module(f"energylab.bench.{SECTIONS[name]}")
        print(f"\n== {name} ==", flush=True)
        started = time.perf_counter()
        options = {k: v for k, v in (("device", args.device), ("dtype", args.dtype), ("tokens", args.tokens))
                   if v is not None}
        if options and not set(options) <= set(inspect.signature(module.run).parameters):
            parser.error(f"section {name} takes no {'/'.join(options)}")
        rows = module.run(quick=args.quick, **options)
        if (args.device or "cpu") == "cpu":
            import torch

            for row in rows:
                row.setdefault("capability", torch.backends.cpu.get_cpu_capability())
                row.setdefault("mkl", os.environ.get("MKL_ENABLE_INSTRUCTIONS", "default"))
        print(format_table(rows), flush=True)
        results[name] = rows
        if args.commit:
            record = Results("bench", {"section": name, "quick": args.quick, **options}, tables={name: rows})
            stored = name if args.capability is None else f"{name}-{processor_family()}-{args.capability}"
            path = commit_results(record, "bench", stored, seconds=time.perf_counter() - started, source=source,
                                  command=f"python -m energylab.bench {name}{' --quick' * args.quick}"
                                  + "".join(f" --{k} {_arg(v)}" for k, v in options.items())
                                  + (f" --capability {args.capability}" if args.capability else "") + " --commit")
            print(f"committed to {path}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


CAPABILITIES = ("avx2", "avx512", "default")
# MKL's instruction set for a capability below the processor's: ATEN_CPU_CAPABILITY leaves MKL's gemm (which the
# layers, SDPA and the C kernels all call) at the processor's widest, which an AVX2-only reader does not have
# (measured here, Sapphire Rapids, one thread: a 1,024² sgemm 13.8 ms as it is, 22.4 ms limited to AVX2)
MKL_INSTRUCTIONS = {"avx2": "AVX2"}


def processor_family() -> str:
    """"intel", "amd" or "arm" from the processor's model name (:func:`energylab.engine.committed.machine`), else
    "cpu": the middle part of a committed per-processor benchmark's name."""
    from energylab.engine.committed import machine

    model = machine()["processor"].lower()
    return next((f for f, keys in (("intel", ("intel", "xeon")), ("amd", ("amd", "epyc", "ryzen")),
                                   ("arm", ("arm", "neoverse", "apple"))) if any(k in model for k in keys)), "cpu")


def _arg(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


if __name__ == "__main__":
    sys.exit(main())
