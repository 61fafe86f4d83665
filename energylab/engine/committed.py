"""Committed results: medium and full runs, run once and kept in the repository with where, when and from what.

A chapter executes its quick profile live; the medium profile (the paper's protocol at the smallest scale where its
effect should show) takes minutes to an hour, so it is run once, here:

    python -m energylab run nt --profile medium --commit          # -> results/nt/medium.json

and the chapter reads it back with :func:`load_committed`. The file is a :class:`~energylab.engine.results.Results`
with a ``provenance`` block: the machine (processor, cores, accelerator), the date, the git commit the code was at (and
whether the tree had uncommitted changes), the command, the wall-clock time and the library versions. Tests read the
same files to check every claim the book makes about them.

Layout: ``results/<experiment>/<name>.json`` at the top of the repository (``name`` is usually the profile:
``medium``, ``full``, or ``full-<slice>`` for part of a full grid). Run folders of ``python -m energylab run``
(``results/<experiment>-<profile>/``, with checkpoints) are git-ignored; these files are not. A wheel ships the same
files inside the package, ``energylab/_results/<experiment>/<name>.json`` (setup.py), so that the chapters run
where the library is pip-installed (Colab); :data:`ROOT` is that folder there and the repository's ``results/`` in a
checkout.
"""
from __future__ import annotations

import datetime
import os
import pathlib
import platform
import re
import subprocess
import sys
from typing import Any

from energylab.engine.results import Results
from energylab.engine.runs import read_json, write_json

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An installed wheel carries the committed files in the package (setup.py copies them there when it builds one); a
# checkout has none there and reads the repository's results/ beside the package, as do its tests and chapters.
PACKAGED = os.path.join(_PACKAGE, "_results")
ROOT = PACKAGED if os.path.isdir(PACKAGED) else os.path.join(os.path.dirname(_PACKAGE), "results")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def committed_path(experiment: str, name: str, root: str | None = None) -> str:
    """``<root>/<experiment>/<name>.json`` (root: the repository's results/); ValueError for unsafe names."""
    for label, value in (("experiment", experiment), ("name", name)):
        if not isinstance(value, str) or not _NAME.match(value):
            raise ValueError(f"{label} must be lower-case letters, digits, '.', '_' or '-', got {value!r}")
    return os.path.join(ROOT if root is None else root, experiment, f"{name}.json")


def machine() -> dict[str, Any]:
    """What ran it: processor model, logical cores, OS, Python, torch, and the CUDA device if there is one."""
    import torch

    info = {"processor": _cpu_model(), "cores": os.cpu_count(), "system": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["accelerator"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def source_commit(repo: str | None = None) -> dict[str, Any]:
    """{"commit": HEAD's hash or None outside git, "dirty": uncommitted changes to the code a run executes (the
    energylab package and the pinned environment; notebooks and pages being edited meanwhile do not count)}."""
    repo = repo or os.path.dirname(_PACKAGE)  # the checkout (the folder above the package)

    def git(*args):
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no", "--", "energylab", "requirements.txt",
                     "pyproject.toml")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if head.returncode:
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def commit_results(results: Results, experiment: str, name: str, *, seconds: float | None = None,
                   command: str | None = None, source: dict | None = None, root: str | None = None,
                   overwrite: bool = False) -> str:
    """Write ``results`` with its provenance to ``results/<experiment>/<name>.json``; return the path.

    ``seconds`` is the run's wall-clock time, ``command`` how to rerun it (default: this process's argv) and
    ``source`` the :func:`source_commit` taken when the run STARTED (default: now; the code may have moved on
    during a long run, so callers that run the experiment pass the one they took first). An existing committed
    file is replaced only with ``overwrite=True`` (ValueError otherwise: committed runs took long to make).
    """
    if not isinstance(results, Results):
        raise TypeError(f"results must be an energylab.engine.results.Results, got {type(results).__name__}")
    if results.experiment != experiment:
        raise ValueError(f"results are of experiment {results.experiment!r}, not {experiment!r}")
    path = committed_path(experiment, name, root)
    check_not_committed(path, overwrite)
    data = results.to_dict()
    from energylab import portable

    unpinned = portable.unpinned()
    data["provenance"] = {
        "machine": machine(), **(source if source is not None else source_commit()),
        # "pinned": every x86-64 processor reproduces the run bit for bit (energylab.portable); otherwise only
        # this machine's kernels do, and the unpinned variables are named
        "numerics": "pinned" if not unpinned else "unpinned: " + ", ".join(unpinned),
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "command": command if command is not None else " ".join(["python -m energylab", *sys.argv[1:]]),
        "seconds": None if seconds is None else round(float(seconds), 1)}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return write_json(path, data)


def check_not_committed(path: str, overwrite: bool = False) -> None:
    """ValueError naming ``path`` if a committed file is there and ``overwrite`` is False."""
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"{path} already holds committed results; pass --force (overwrite=True) to replace them, "
                         f"or --commit NAME to write another file")


def load_committed(experiment: str, name: str = "medium", root: str | None = None) -> tuple[Results, dict]:
    """(Results, provenance) from ``results/<experiment>/<name>.json``; FileNotFoundError says how to make it."""
    path = committed_path(experiment, name, root)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no committed results at {path}; make them with "
                                f"`python -m energylab run {experiment} --profile {name} --commit`")
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a committed results file (a JSON object), got a {type(data).__name__}")
    provenance = data.pop("provenance", None)
    if not isinstance(provenance, dict):
        raise ValueError(f"{path} has no provenance block (a JSON object), got {provenance!r:.60}")
    missing = {"machine", "date", "commit"} - set(provenance)
    if missing:
        raise ValueError(f"{path} lacks provenance fields {sorted(missing)}")
    if not isinstance(provenance["machine"], dict) or not isinstance(provenance["date"], str):
        raise ValueError(f"{path}: provenance 'machine' must be an object and 'date' a string")
    try:
        return Results.from_dict(data), provenance
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise ValueError(f"{path} is not an energylab results file ({type(err).__name__}: {err}); it was edited or "
                         f"truncated: restore it with git") from None


def cpu_benchmarks(section: str = "attention", root: str | None = None) -> dict[str, tuple]:
    """Every committed CPU benchmark of a bench ``section`` ("attention", "hyperset", "sphere"), ``{name: (Results,
    provenance)}``: ``<section>`` (the first one, with the processor's own instruction set) and the
    ``<section>-<processor family>-<capability>`` files of ``python -m energylab.bench <section> --capability ...
    --commit``; files whose rows ran on a GPU are left out. Sorted by file name."""
    folder = pathlib.Path(root or ROOT) / "bench"
    out = {}
    for path in sorted(folder.glob(f"{section}*.json")):
        if path.stem != section and not path.stem.startswith(f"{section}-"):
            continue
        results, provenance = load_committed("bench", path.stem, root=root)
        if all(row.get("device", "cpu") == "cpu" for row in results.tables.get(section, [])):
            out[path.stem] = (results, provenance)
    return out


def instruction_set(row: dict) -> str:
    """The instruction sets a committed CPU bench row ran with: ATen's (``capability``; "native" in files from
    before it was recorded), and MKL's where the run held it below the processor's (``mkl``), e.g. "AVX2, MKL AVX2"."""
    mkl = row.get("mkl", "default")
    return row.get("capability", "native") + ("" if mkl == "default" else f", MKL {mkl}")


def describe_provenance(provenance: dict) -> str:
    """One line for a caption: date, machine, commit (and whether the tree was dirty), wall-clock time, and any
    amendment made to the file afterwards."""
    m = provenance["machine"]
    where = m.get("accelerator") or f"{m.get('processor', '?')}, {m.get('torch_threads', '?')} thread(s)"
    commit = (provenance.get("commit") or "unknown commit")[:10] + (" + local changes" if provenance.get("dirty")
                                                                     else "")
    took = "" if provenance.get("seconds") is None else f", {provenance['seconds'] / 60:.1f} min"
    pinned = ", pinned numerics" if provenance.get("numerics") == "pinned" else ""
    # a later change to the file that did not rerun it (scripts/recompute_spreads.py), said wherever it is shown
    amended = "".join(f"; amended {a['date']}: {a['what']}" for a in provenance.get("amended", ()))
    return f"run {provenance['date'][:10]} on {where} at {commit}{took}{pinned}{amended}"
