"""Execute chapters in place, the way they are committed: `python scripts/execute_notebooks.py [NOTEBOOK ...]`.

Uses nbclient directly (not papermill) so the committed file carries no run timestamps or injected-parameter
cells; widget state is stored so the website can show the saved widgets. Runs with one thread, like nbval.
With no argument, executes every notebooks/NN_*.ipynb and prints the wall time of each.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import nbclient  # noqa: E402
import nbformat  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def execute(path: pathlib.Path) -> float:
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=1800, store_widget_state=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:  # drop per-run noise so that re-executing gives a clean diff
        cell.metadata.pop("execution", None)
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, path)
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    paths = [pathlib.Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path.name}: {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
