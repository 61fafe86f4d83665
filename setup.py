"""The one build step pyproject.toml cannot declare: the committed results go into the wheel.

A chapter reads the committed medium and full runs (``energylab.engine.committed.load_committed``) from the
repository's ``results/<experiment>/<name>.json``. That folder sits beside the package, not in it, so a wheel would
not carry it and 8 of 12 chapters would stop outside the checkout (Colab, a reader's own environment). This copies
every committed results file (a JSON object with a ``provenance`` block: the run folders of ``python -m energylab
run``, git-ignored under results/, have none) into ``energylab/_results/`` of the built package, where
``committed.ROOT`` finds it when the package is installed. In the checkout (an editable install included) nothing is
copied and the library reads ``results/`` itself. About 4.7 MB of JSON, 1.2 MB compressed in the wheel.
"""
import json
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PACKAGED = os.path.join("energylab", "_results")  # energylab.engine.committed.PACKAGED


def committed_files(results: str = RESULTS) -> list[str]:
    """results/<experiment>/<name>.json files holding committed results, relative to ``results``, sorted."""
    found = []
    for experiment in sorted(os.listdir(results)) if os.path.isdir(results) else []:
        folder = os.path.join(results, experiment)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                try:
                    data = json.load(f)
                except ValueError:
                    continue
            if isinstance(data, dict) and isinstance(data.get("provenance"), dict):
                found.append(f"{experiment}/{name}")
    return found


class BuildWithResults(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads results/ of the checkout
            return
        files = committed_files()
        if not files:
            raise RuntimeError(f"no committed results under {RESULTS}: a wheel without them cannot run the chapters")
        for rel in files:
            target = os.path.join(self.build_lib, PACKAGED, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(RESULTS, rel), target)
        print(f"copied {len(files)} committed results files into {PACKAGED}/")


if __name__ == "__main__":  # as setuptools runs it; a test imports the module for committed_files
    setup(cmdclass={"build_py": BuildWithResults})
