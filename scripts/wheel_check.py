"""Do the chapters run where the library is pip-installed, outside the checkout (Colab, a reader's own kernel)?

    python scripts/wheel_check.py                  # every chapter (11.6 min measured, one thread per kernel)
    python scripts/wheel_check.py 10 11            # some chapters (by number or file name)
    python scripts/wheel_check.py --keep /tmp/w    # keep the wheel, the venv and the executed chapters there

It builds the wheel from this checkout (a copy of the files a wheel is built from, so the checkout gets no build
folders; the build copies the committed results into the package, setup.py), installs it with ``--no-deps`` into a
fresh virtual environment in a temporary folder outside the checkout, and executes each chapter there under nbval
(pytest --nbval), from a copy of the chapter in that folder, with no PYTHONPATH: every cell runs and its outputs must
equal the committed ones, with the numerics pinned as in the checkout's own nbval run (energylab.portable). A cell
added after the install cell asserts that the kernel imported the installed package and reads the results it ships.

The venv sees the rest of the environment (torch, plotly, Jupyter, nbval) through a .pth file that names this
interpreter's site-packages, added after the wheel is installed: nothing is downloaded, and the editable install of
the checkout there stays invisible (a .pth-added folder's own .pth files are not read). tests/book/test_wheel.py
runs the fast chapters that read committed results on every test run (ENERGYLAB_WHEEL_CHAPTERS=all: every chapter).
Prints each chapter's wall time; exit status 1 when a chapter fails, 2 (one line ``error: ...``) for bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import site
import subprocess
import sys
import tempfile
import time
import venv

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from energylab import portable  # noqa: E402 - torch-free

# what a wheel is built from (pyproject.toml's packages, setup.py's results, the readme and license it names)
SOURCES = ("energylab", "results", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")
PROBE_TAG = "wheel-check-probe"
INSTALL_TAG = "install-energylab"  # scripts/chapter_cells.py


def chapters() -> list[pathlib.Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def select(names: list[str] | None) -> list[pathlib.Path]:
    """The chapters ``names`` name ("05", "05_expressive_attention.ipynb"); all for none. ValueError otherwise."""
    if not names:
        return chapters()
    picked = []
    for name in names:
        match = [p for p in chapters() if p.name == name or p.name.split("_", 1)[0] == name.zfill(2)]
        if not match:
            raise ValueError(f"no chapter {name!r} in notebooks/")
        picked += match
    return picked


def build_wheel(folder: pathlib.Path) -> pathlib.Path:
    """Build the wheel of this checkout into ``folder``/dist (from a copy in ``folder``/src); its path."""
    src = folder / "src"
    package = shutil.ignore_patterns("__pycache__", "*.pyc", "_results")  # a stray packaged copy is not a source
    results = shutil.ignore_patterns("*.pt")  # checkpoints of local runs (git-ignored) are not shipped anyway
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=package if name == "energylab" else results)
        else:
            shutil.copy2(path, src / name)
    dist = folder / "dist"
    # with this environment's setuptools when it has one (nothing downloaded); else pip fetches it, as on Colab
    isolation = ["--no-build-isolation"] if _has_setuptools() else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(dist), str(src)],
                   check=True, cwd=folder, env=clean_env())
    (wheel,) = dist.glob("energylab-*.whl")
    return wheel


def _has_setuptools(least: tuple[int, int] = (68, 0)) -> bool:
    """Whether this interpreter has setuptools >= ``least`` (pyproject.toml's build requirement)."""
    from importlib import metadata

    try:
        found = tuple(int(part) for part in metadata.version("setuptools").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return found >= least


def clean_env() -> dict:
    """This process's environment less what would show the checkout to a child (PYTHONPATH) or another venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def make_venv(path: pathlib.Path, wheel: pathlib.Path) -> pathlib.Path:
    """A fresh virtual environment at ``path`` with ``wheel`` installed and this interpreter's packages visible;
    its python."""
    venv.EnvBuilder(with_pip=True).create(path)
    python = path / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   cwd=path, env=clean_env())
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    # after the install: pip must not see (nor offer to replace) the checkout's editable install
    ours = [p for p in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(p)]
    (pathlib.Path(purelib) / "energylab_wheel_check_deps.pth").write_text("\n".join(ours) + "\n")
    return python


def where_installed(python: pathlib.Path, cwd: pathlib.Path) -> dict:
    """{"package": energylab's folder, "results": committed.ROOT, "version": ...} as ``python`` imports them."""
    code = ("import json, energylab, os; from energylab.engine import committed; print(json.dumps({'package': "
            "os.path.dirname(energylab.__file__), 'results': committed.ROOT, 'version': energylab.__version__}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, cwd=cwd,
                         env=clean_env())
    return json.loads(out.stdout)


def probe_cell(venv_path: pathlib.Path) -> dict:
    """A code cell that fails unless the kernel imported the package installed in ``venv_path`` and its results."""
    source = "\n".join([
        "# wheel_check: this kernel must use the installed wheel and the committed results it ships",
        "import os",
        "import energylab",
        "from energylab.engine import committed",
        f"assert energylab.__file__.startswith({str(venv_path) + os.sep!r}), energylab.__file__",
        "assert committed.ROOT == committed.PACKAGED and os.path.isdir(committed.ROOT), committed.ROOT"])
    return {"cell_type": "code", "id": PROBE_TAG, "metadata": {"tags": [PROBE_TAG]}, "source": source,
            "execution_count": None, "outputs": []}


def stage(chapter: pathlib.Path, folder: pathlib.Path, venv_path: pathlib.Path) -> pathlib.Path:
    """A copy of ``chapter`` in ``folder`` with the probe cell right after its install cell."""
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    cells = nb["cells"]
    install = next(i for i, c in enumerate(cells) if INSTALL_TAG in c.get("metadata", {}).get("tags", []))
    cells.insert(install + 1, probe_cell(venv_path))
    target = folder / chapter.name
    target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


def prepare_runs(folder: pathlib.Path) -> None:
    """pytest's configuration for the chapters in ``folder``: nbval as the checkout runs it, numerics pinned."""
    shutil.copy2(ROOT / "tests" / "nbval_sanitize.cfg", folder / "nbval_sanitize.cfg")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --nbval --nbval-current-env --nbval-sanitize-with "
                                       "nbval_sanitize.cfg --nbval-cell-timeout=900 -p no:cacheprovider\n")
    (folder / "conftest.py").write_text("from energylab import portable  # the installed package\n\n"
                                        "portable.pin_environment()\n")


def run_chapter(python: pathlib.Path, notebook: pathlib.Path, timeout: float = 3600) -> dict:
    """nbval over one staged chapter with the venv's python: {"notebook", "seconds", "ok", "tail"}."""
    env = clean_env()
    portable.pin_environment(env)  # one thread and the pinned kernels, as the checkout's conftest.py sets them
    env["PATH"] = str(python.parent) + os.pathsep + env.get("PATH", "")
    t0 = time.perf_counter()
    try:
        out = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:randomly", notebook.name],
                             capture_output=True, text=True, cwd=notebook.parent, env=env, timeout=timeout)
        ok, text = out.returncode == 0, out.stdout + out.stderr
    except subprocess.TimeoutExpired as err:
        ok, text = False, f"timed out after {timeout:.0f} s\n{err.stdout or ''}"
    return {"notebook": notebook.name, "seconds": round(time.perf_counter() - t0, 1), "ok": ok,
            "tail": "\n".join(text.splitlines()[-40:])}


class Installed:
    """The wheel of this checkout installed in a fresh venv under ``folder`` (outside the checkout)."""

    def __init__(self, folder: pathlib.Path):
        folder = folder.resolve()
        if folder == ROOT or ROOT in folder.parents:
            raise ValueError(f"{folder} is inside the checkout; the check needs a folder outside it")
        self.folder = folder
        self.wheel = build_wheel(folder)
        self.venv = folder / "venv"
        self.python = make_venv(self.venv, self.wheel)
        self.runs = folder / "chapters"
        self.runs.mkdir()
        prepare_runs(self.runs)

    def run(self, chapter: pathlib.Path, timeout: float = 3600) -> dict:
        return run_chapter(self.python, stage(chapter, self.runs, self.venv), timeout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", help="chapter numbers or file names (default: every chapter)")
    parser.add_argument("--keep", type=pathlib.Path, help="an empty or new folder to build in and keep")
    args = parser.parse_args(argv)
    try:
        paths = select(args.chapters)
        if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
            raise ValueError(f"--keep {args.keep} is not empty")
        if args.keep is not None and (args.keep.resolve() == ROOT or ROOT in args.keep.resolve().parents):
            raise ValueError(f"--keep {args.keep} is inside the checkout; the check needs a folder outside it")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="energylab-wheel-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        installed = Installed(folder)
        size = installed.wheel.stat().st_size / 2**20
        print(f"[wheel] {installed.wheel.name}, {size:.2f} MiB, installed in {installed.venv} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        results = []
        for path in paths:
            result = installed.run(path)
            results.append(result)
            print(f"[wheel] {path.name}: {'passes' if result['ok'] else 'FAILS'} in {result['seconds']:.0f} s",
                  flush=True)
            if not result["ok"]:
                print(result["tail"], flush=True)
        (folder / "runs.json").write_text(json.dumps(results, indent=1))
        failed = [r["notebook"] for r in results if not r["ok"]]
        print(f"[wheel] {len(results) - len(failed)} of {len(results)} chapters pass outside the checkout"
              + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
        return 1 if failed else 0
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
