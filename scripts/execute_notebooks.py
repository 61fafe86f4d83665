"""Execute chapters in place, the way they are committed: `python scripts/execute_notebooks.py [NOTEBOOK ...]`.

Uses nbclient directly (not papermill) so the committed file carries no run timestamps or injected-parameter
cells; widget state is stored so the website can show the saved widgets; the numbers the prose quotes
(``{eval}`N.<name>``` roles, :mod:`energylab.notebook.prose`) are stored in their markdown cells. Runs with the pinned
numerics of
:mod:`energylab.portable`, like nbval.
With no argument, executes every notebooks/NN_*.ipynb and prints the wall time of each. A path that is not a
readable .ipynb file is one line ``error: ...`` and exit status 2, before any chapter runs.
"""
from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from energylab import portable  # noqa: E402 - torch-free
from energylab.notebook import prose  # noqa: E402 - torch-free

portable.pin_environment()  # before any kernel starts: kernels inherit the pinned numerics

import nbclient  # noqa: E402
import nbformat  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclean import clean  # noqa: E402


def execute(path: pathlib.Path) -> float:
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    # IPC transport: with several kernels on one machine, TCP kernels were seen to hang at start-up. The socket
    # path must be absolute, since the kernel runs in the notebook's folder and the client here.
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(tempfile.mkdtemp(), "kernel"))
    client = nbclient.NotebookClient(nb, km=km, timeout=1800, store_widget_state=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    clean(nb)  # drop per-run noise so that re-executing gives a clean diff
    prose.fill(nb)  # the {eval} roles' values, for the website, the PDF and a notebook opened without a kernel
    nbformat.write(nb, path)
    return time.perf_counter() - t0


def check_notebook(arg: str) -> pathlib.Path:
    """The notebook ``arg`` names, resolved; ValueError (naming it) unless it is a readable .ipynb file."""
    path = pathlib.Path(arg).resolve()
    if not path.exists():
        raise ValueError(f"notebook {arg!r} does not exist")
    if not path.is_file() or path.suffix != ".ipynb":
        raise ValueError(f"notebook {arg!r} is not a .ipynb file")
    try:
        nbformat.read(path, as_version=4)
    except Exception as err:  # noqa: BLE001 - nbformat raises JSON, validation and OS errors alike
        raise ValueError(f"notebook {arg!r} cannot be read as a notebook ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from None
    return path


def main(argv: list[str]) -> int:
    try:  # every path checked before the first chapter runs (each takes minutes)
        paths = [check_notebook(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"{path.name}: {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
