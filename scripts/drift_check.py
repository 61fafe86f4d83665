"""Do the chapters still hold under the newest torch, NumPy, SciPy and plotly? `python scripts/drift_check.py`

The book pins its environment (requirements.txt) so that nbval can compare committed outputs digit for digit. A
reader on Colab or with their own environment gets newer libraries. This script builds a fresh virtual
environment with the newest torch, numpy, scipy and plotly that pip will install here, the rest of requirements.txt
as pinned, and the library (editable), then executes every chapter's quick profile in it. A chapter *holds* when
it runs to the end: its cells assert the chapter's own checks and claims (derivations against autograd, the
committed results' verdicts), which are what must survive a new library; the digits are not compared. Warnings
and stderr that appear under the new versions are listed too (they are what a reader would see first).

    python scripts/drift_check.py                          # a temporary venv, every chapter
    python scripts/drift_check.py --venv /tmp/drift-venv   # keep (and on a rerun reuse) the environment
    python scripts/drift_check.py --torch 2.14.1 --chapters 01 06
    python scripts/drift_check.py --venv /tmp/drift-venv --from-runs DIR1 DIR2   # one report from two runs

The executed notebooks go to a temporary folder (never over the committed ones); the report goes to
results/drift/<date>.md (<date>-2.md, ... on a rerun the same day). Exit status 1 when a chapter does not hold; 2,
with one line ``error: ...``, for bad input (a chapter, a path, a damaged runs.json), before any work.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from energylab import portable  # noqa: E402 - torch-free

NUMERIC = ("torch", "numpy", "scipy", "plotly")  # the packages whose newest release is tried
REPORTS = ROOT / "results" / "drift"
STAMP = "drift-check.json"  # in the venv: what was installed there, so a rerun with --venv skips the install


class Refused(SystemExit):
    """Bad input (a path, a chapter, a state file): :func:`main` prints it as one line ``error: ...``, exit 2."""


def _requirement_name(line: str) -> str | None:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):  # comments, options and the editable install of the library
        return None
    return re.split(r"[\s=<>!~\[;]", line, maxsplit=1)[0].lower()


def other_requirements(text: str) -> list[str]:
    """requirements.txt's pinned lines, less the numeric packages (upgraded here) and `-e .` (installed apart)."""
    keep = []
    for raw in text.splitlines():
        name = _requirement_name(raw)
        if name is not None and name not in NUMERIC:
            keep.append(raw.split("#", 1)[0].strip())
    return keep


def newest_on_registry(python: str, package: str) -> str | None:
    """The newest version the registry lists (`pip index versions`), whether or not it installs here."""
    out = subprocess.run([python, "-m", "pip", "index", "versions", package], capture_output=True, text=True)
    match = re.search(r"^\S+ \(([^)]+)\)", out.stdout, re.MULTILINE)
    return match.group(1) if match else None


def _pip(python: str, *args: str, log: list[str]) -> None:
    cmd = [python, "-m", "pip", "install", "--disable-pip-version-check", *args]
    print("[drift] " + " ".join(cmd[1:]), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    # pip's resolver warnings (a pinned package that asks for an older numpy, ...) are part of the finding
    log += [line for line in out.stderr.splitlines() if "requires" in line or "incompatible" in line]
    if out.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)} failed:\n{out.stderr[-3000:]}")


def build_venv(path: pathlib.Path, torch_spec: str) -> dict:
    """The environment at ``path`` (built when missing or built for another torch): the other requirements as
    pinned, then the newest numeric packages over them, then the library without dependencies."""
    python = str(path / "bin" / "python")
    stamp = path / STAMP
    if path.exists() and not path.is_dir():
        raise Refused(f"--venv {path} is a file, not a folder; give an empty or new --venv")
    if stamp.exists():
        try:
            record = json.loads(stamp.read_text())
        except (ValueError, OSError):  # our own state file, damaged: the folder is ours, rebuilt below
            record = {}
        if isinstance(record, dict) and record.get("torch_spec") == torch_spec and "built" in record:
            print(f"[drift] reusing {path} (built {record['built']})", flush=True)
            return record
    if path.exists() and any(path.iterdir()):
        if not stamp.exists():  # never delete a folder this script did not build (a reader's own venv, say)
            raise Refused(f"{path} exists and was not built by drift_check.py; give an empty or new --venv")
        shutil.rmtree(path)  # built here for another torch, or a build of ours that failed
    venv.EnvBuilder(with_pip=True).create(path)
    # claimed before pip runs: a failed install leaves a folder that the next run knows it may rebuild
    stamp.write_text(json.dumps({"torch_spec": torch_spec, "building": True}))
    log: list[str] = []
    t0 = time.perf_counter()
    _pip(python, *other_requirements((ROOT / "requirements.txt").read_text()), log=log)
    # --upgrade over what the pinned packages pulled in: the newest release wins, and pip says what it breaks
    _pip(python, "--upgrade", torch_spec, *NUMERIC[1:], log=log)
    _pip(python, "--no-deps", "-e", str(ROOT), log=log)
    record = {"torch_spec": torch_spec, "built": datetime.datetime.now(datetime.timezone.utc).isoformat()[:16],
              "install_seconds": round(time.perf_counter() - t0), "pip_conflicts": log}
    stamp.write_text(json.dumps(record, indent=1))
    return record


def pip_caps(python: str) -> list[str]:
    """The numeric packages' lines in the constraints file of pip's configuration (a machine may cap torch)."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    caps = []
    for match in re.finditer(r"constraint='([^']+)'", out):
        path = pathlib.Path(match.group(1))
        if path.exists():
            caps += [f"{line.strip()} ({path})" for line in path.read_text().splitlines()
                     if _requirement_name(line) in NUMERIC]
    return caps


def installed_versions(python: str) -> dict:
    code = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
            f"{list(NUMERIC) + ['scikit-learn', 'ipykernel', 'nbclient']!r}}}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def execute_chapters(paths: list[pathlib.Path], out_dir: pathlib.Path, timeout: int) -> list[dict]:
    """Run inside the drift environment (its python runs this file with --execute-into): execute each chapter
    on a copy, in the chapters' own folder (they read committed results relative to it), and record the result."""
    import nbclient
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclean import notebook_problems

    # a kernel spec of this interpreter, first on JUPYTER_PATH: a "python3" spec elsewhere (the user's, another
    # venv's) must not run the chapters with the pinned libraries
    specs = pathlib.Path(tempfile.mkdtemp(prefix="energylab-drift-kernel-"))
    (specs / "kernels" / "drift").mkdir(parents=True)
    (specs / "kernels" / "drift" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "drift", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(specs)
    runs = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        km = KernelManager(kernel_name="drift", transport="ipc", ip=os.path.join(tempfile.mkdtemp(), "kernel"))
        client = nbclient.NotebookClient(nb, km=km, timeout=timeout, resources={"metadata": {"path": str(path.parent)}})
        t0 = time.perf_counter()
        error = None
        try:
            client.execute()
        except Exception as err:  # a failing assert (CellExecutionError), a timeout or a dead kernel
            cell = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                         and any(o.get("output_type") == "error" for o in c.get("outputs", []))), None)
            first = ""
            if cell is not None:
                first = next((ln for ln in nb.cells[cell].source.splitlines() if ln.strip()), "")
            error = {"type": type(err).__name__, "cell": cell, "cell_starts": first[:100],
                     "message": " ".join(str(getattr(err, "evalue", None) or err).split())[-400:],
                     "ename": getattr(err, "ename", None)}
        finally:
            # a kernel manager we pass in is ours to stop: nbclient leaves it running, and one idle kernel per
            # finished chapter would stay alive (and hold its memory) until the whole check ends
            if km.has_kernel:
                km.shutdown_kernel(now=True)
        seconds = time.perf_counter() - t0
        nbformat.write(nb, out_dir / path.name)
        problems = [p for p in notebook_problems(nb) if "error output" not in p]
        runs.append({"notebook": path.name, "seconds": round(seconds, 1), "error": error, "problems": problems,
                     "executed": str(out_dir / path.name)})
        verdict = "holds" if error is None else f"FAILS ({error['ename'] or error['type']})"
        print(f"[drift] {path.name}: {verdict} in {seconds:.0f} s, {len(problems)} warning/stderr output(s)",
              flush=True)
        (out_dir / "runs.json").write_text(json.dumps(runs, indent=1))  # partial results survive an interruption
    return runs


def printed_changes(committed: pathlib.Path, executed: pathlib.Path) -> tuple[int, int]:
    """(cells whose printed text differs, cells compared): stdout of the code cells nbval compares (those without
    NBVAL_IGNORE_OUTPUT), in the committed chapter and in its run under the new versions. Not a pass criterion
    (digits may move with a library), but it says whether they did."""
    def printed(cell) -> str:
        return "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")

    old, new = (json.loads(p.read_text(encoding="utf-8")) for p in (committed, executed))
    pairs = [(a, b) for a, b in zip(old["cells"], new["cells"]) if a["cell_type"] == "code"
             and "NBVAL_IGNORE_OUTPUT" not in "".join(a["source"]) and (printed(a) or printed(b))]
    return sum(printed(a) != printed(b) for a, b in pairs), len(pairs)


def render(runs: list[dict], versions: dict, pinned: dict, newest: dict, record: dict, machine: str,
           note: str) -> str:
    """The report as markdown."""
    held = [r for r in runs if r["error"] is None]
    lines = [f"# Drift check {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC", "",
             f"`python scripts/drift_check.py` (commit {_commit()}): every chapter listed below executed at its "
             "quick profile in a fresh virtual environment with the newest numeric libraries that install here, "
             "the other requirements as pinned. A chapter **holds** when it runs to the end, its own assertions "
             "and claim checks included; digits are not required to match (nbval checks them in the pinned "
             "environment), but the last column counts the code cells nbval compares whose printed text changed.",
             "",
             f"**{len(held)} of {len(runs)} chapters hold.** Machine: {machine}.", "",
             "| Package | Pinned (requirements.txt) | Tested here | Newest on the registry |", "|---|---|---|---|"]
    for name in NUMERIC:
        lines.append(f"| {name} | {pinned.get(name, '?')} | {versions.get(name, '?')} | {newest.get(name) or '?'} |")
    lines += ["", note, "", "| Chapter | Result | Wall time | Warnings / stderr under these versions | Printed text "
              "changed (compared cells) |", "|---|---|---|---|---|"]
    for r in runs:
        if r["error"] is None:
            result = "holds"
        else:
            e = r["error"]
            result = f"fails at cell {e['cell']} (`{e['cell_starts']}`): {e['ename'] or e['type']}: {e['message']}"
        shown = "; ".join(r["problems"][:3]) + (f" (and {len(r['problems']) - 3} more)" if len(r["problems"]) > 3
                                                else "")
        changed = "?"
        executed = pathlib.Path(r.get("executed", ""))
        if r["error"] is None and executed.is_file():
            differ, compared = printed_changes(ROOT / "notebooks" / r["notebook"], executed)
            changed = f"{differ} of {compared}"
        lines.append(f"| {r['notebook']} | {_cell(result)} | {r['seconds'] / 60:.1f} min | {_cell(shown) or 'none'} "
                     f"| {changed} |")
    lines += ["", "pip's resolver, installing the newest releases over the pinned ones: "
              + ("; ".join(f"`{c.strip()}`" for c in record.get("pip_conflicts", [])) or "no conflicts reported."), ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "?"


def pinned_versions() -> dict:
    pins = {}
    for raw in (ROOT / "requirements.txt").read_text().splitlines():
        name = _requirement_name(raw)
        if name in NUMERIC and "==" in raw:
            pins[name] = raw.split("#", 1)[0].split("==", 1)[1].strip()
    return pins


def _is_chapter(path: pathlib.Path, chapter: str) -> bool:
    """A number names one chapter (1 and 01: 01_*, never 10 or 11); anything else is a prefix of the file name."""
    return int(path.name[:2]) == int(chapter) if chapter.isdigit() else path.name.startswith(chapter)


def select(chapters: list[str] | None) -> list[pathlib.Path]:
    every = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not chapters:
        return every
    missing = [c for c in chapters if not any(_is_chapter(p, c) for p in every)]
    if missing:
        raise Refused(f"no chapter starts with {missing}; --chapters takes numbers or name prefixes of "
                      f"{', '.join(p.name[:-6] for p in every)}")
    return [p for p in every if any(_is_chapter(p, c) for c in chapters)]


def _check_out(out: pathlib.Path) -> None:
    """Refuse a report path that cannot be written before any work (it once failed only after every chapter)."""
    if out.is_dir():
        raise Refused(f"--out {out} is a folder; give the report's file path")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise Refused(f"--out {out}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise Refused(f"--out {out}: {parent} is not writable")
            return


def _default_out(day: str) -> pathlib.Path:
    """results/drift/<day>.md, or <day>-2.md, -3, ... when a report of that day is there (never overwritten)."""
    out, n = REPORTS / f"{day}.md", 1
    while out.exists():
        n += 1
        out = REPORTS / f"{day}-{n}.md"
    return out


def _read_runs(folder: pathlib.Path) -> list[dict]:
    """The runs.json of an earlier execution in ``folder``: a list of runs, each naming its notebook."""
    path = folder / "runs.json"
    if not path.is_file():
        raise Refused(f"--from-runs {folder}: no runs.json there (give a folder written by an earlier execution)")
    try:
        runs = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:
        raise Refused(f"--from-runs {folder}: runs.json is damaged ({err})") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("notebook"), str)
                                             for r in runs):
        raise Refused(f"--from-runs {folder}: runs.json is damaged (not a list of runs that name their notebook)")
    return runs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=pathlib.Path, help="where to build (or reuse) the environment; "
                        "default: a temporary folder, removed afterwards")
    parser.add_argument("--torch", default=None, help="torch version to test (default: the newest pip installs)")
    parser.add_argument("--chapters", nargs="*", help="chapter number prefixes (01 06 ...); default: all")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds one cell may run")
    parser.add_argument("--out", type=pathlib.Path, help="report path (default: results/drift/<date>.md)")
    parser.add_argument("--from-runs", type=pathlib.Path, nargs="+", metavar="DIR",
                        help="write the report from the runs.json of earlier executions (chapters run as several "
                             "checks side by side; a chapter in several: the last DIR's run) with the environment "
                             "of --venv; nothing is executed")
    parser.add_argument("--execute-into", type=pathlib.Path, help=argparse.SUPPRESS)  # inside the drift venv
    args = parser.parse_args(argv)
    try:
        return _main(parser, args)
    except Refused as err:
        print("error: " + " ".join(str(err.code).split()), file=sys.stderr)  # one line
        return 2


def _main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    paths = select(args.chapters)
    if args.execute_into is not None:
        runs = execute_chapters(paths, args.execute_into, args.timeout)
        return 0 if all(r["error"] is None for r in runs) else 1

    if args.from_runs and args.venv is None:
        parser.error("--from-runs reads the environment of --venv")
    if args.out is not None:
        _check_out(args.out)
    earlier = [(d, _read_runs(d)) for d in args.from_runs or []]  # before the environment is built
    temporary = args.venv is None
    path = pathlib.Path(tempfile.mkdtemp(prefix="energylab-drift-")) / "venv" if temporary else args.venv.resolve()
    torch_spec = f"torch=={args.torch}" if args.torch else "torch"
    try:
        record = build_venv(path, torch_spec)
        python = str(path / "bin" / "python")
        versions = installed_versions(python)
        newest = {name: newest_on_registry(python, name) for name in NUMERIC}
        caps = pip_caps(python)
        behind = [n for n in NUMERIC if newest[n] != versions[n]]
        note = "Newest on the registry is what `pip index versions` lists; " + (
            "every numeric package was tested at it." if not behind else
            f"{', '.join(behind)} tested below it: "
            + (f"--torch {args.torch} was asked for; " if args.torch else "")
            + (f"this machine's pip constraints cap {'; '.join(caps)}." if caps else "no pip constraint caps it."))
        if args.from_runs:
            out_dir = args.from_runs[0]
            latest = {r["notebook"]: {"executed": str(d / r["notebook"]), **r} for d, runs in earlier for r in runs}
            runs = [latest[name] for name in sorted(latest)]  # a chapter checked again: its later run counts
            paths = [ROOT / "notebooks" / r["notebook"] for r in runs]
        else:
            out_dir = pathlib.Path(tempfile.mkdtemp(prefix="energylab-drift-notebooks-"))
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            portable.pin_environment(env)  # one thread and the pinned kernels, as in every run of the chapters
            env["PATH"] = str(path / "bin") + os.pathsep + env.get("PATH", "")
            cmd = [python, str(pathlib.Path(__file__).resolve()), "--execute-into", str(out_dir),
                   "--timeout", str(args.timeout), *(["--chapters", *args.chapters] if args.chapters else [])]
            subprocess.run(cmd, env=env, cwd=ROOT)
            runs_file = out_dir / "runs.json"
            runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
        machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python " \
                  f"{platform.python_version()}, one thread per kernel"
        report = render(runs, versions, pinned_versions(), newest, record, machine, note)
        out = args.out or _default_out(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
        print(f"[drift] report: {out}\n[drift] executed notebooks: {out_dir}", flush=True)
        return 0 if runs and len(runs) == len(paths) and all(r["error"] is None for r in runs) else 1
    finally:
        if temporary:
            shutil.rmtree(path.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
