"""Copy the JavaScript the website needs into book/assets/vendor/, so pages render with no network.

What and why:
- plotly.min.js      from the installed plotly wheel: draws every figure (the book renderer emits
                     text/html that calls the Plotly global).
- MathJax 3          (npm `mathjax`): typesets the math; Sphinx would otherwise load it from a CDN.
- require.js + @jupyter-widgets/html-manager's embed-amd.js (npm): render saved ipywidgets state.

The npm packages are fetched once into .energylab_cache/npm (the only step that needs the npm registry);
later runs copy from there. Run: `python scripts/vendor_assets.py`.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENDOR = ROOT / "book" / "assets" / "vendor"
CACHE = ROOT / ".energylab_cache" / "npm"
NPM_PACKAGES = ["mathjax@3.2.2", "requirejs@2.3.8", "@jupyter-widgets/html-manager@1.0.15"]
# MathJax loads these parts of its es5 tree lazily (fonts, TeX extensions, menu, accessibility).
MATHJAX_PARTS = ["tex-chtml.js", "input", "output/chtml", "a11y", "sre", "ui", "adaptors"]


def fetch_npm() -> pathlib.Path:
    modules = CACHE / "node_modules"
    if all((modules / p.rsplit("@", 1)[0]).is_dir() for p in NPM_PACKAGES):
        return modules
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("vendor_assets: npm (Node.js) is needed once to fetch MathJax, require.js and the widget "
                 "manager; install Node.js (e.g. `apt-get install nodejs npm`) and run again.")
    CACHE.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
           "--prefix", str(CACHE), *NPM_PACKAGES]
    subprocess.run(cmd, check=True)
    return modules


def copy(src: pathlib.Path, dst: pathlib.Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def main() -> None:
    import plotly

    modules = fetch_npm()
    copy(pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js", VENDOR / "plotly.min.js")
    for part in MATHJAX_PARTS:
        copy(modules / "mathjax" / "es5" / part, VENDOR / "mathjax" / part)
    copy(modules / "requirejs" / "require.js", VENDOR / "require.js")
    dist = modules / "@jupyter-widgets" / "html-manager" / "dist"
    copy(dist / "embed-amd.js", VENDOR / "html-manager" / "embed-amd.js")
    for font in [*dist.glob("*.woff*"), *dist.glob("*.ttf"), *dist.glob("*.eot"), *dist.glob("*.svg")]:
        copy(font, VENDOR / "html-manager" / font.name)  # icon fonts the widget CSS asks for
    size = sum(f.stat().st_size for f in VENDOR.rglob("*") if f.is_file()) / 2**20
    print(f"vendor_assets: {VENDOR.relative_to(ROOT)} ready ({size:.1f} MiB)")


if __name__ == "__main__":
    main()
