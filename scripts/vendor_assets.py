"""Copy the JavaScript the website needs into book/assets/vendor/, so pages render with no network.

What and why:
- plotly.min.js      from the installed plotly wheel: draws every figure (the book renderer emits
                     text/html that calls the Plotly global).
- MathJax 3          (npm `mathjax`): typesets the math; Sphinx would otherwise load it from a CDN.
- require.js + @jupyter-widgets/html-manager's embed-amd.js (npm): render saved ipywidgets state.

The npm packages are fetched once, in pure Python (no Node.js): for each pinned version the script reads the
npm registry's metadata, downloads the tarball, checks it against the sha512 integrity pinned below and
extracts the parts it needs into .energylab_cache/npm/<name>@<version>/ (the tarball is kept there too).
Later runs copy from the cache, offline. Run: `python scripts/vendor_assets.py`.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import pathlib
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENDOR = ROOT / "book" / "assets" / "vendor"
CACHE = ROOT / ".energylab_cache" / "npm"
REGISTRY = "https://registry.npmjs.org"
# package@version -> the registry's dist.integrity for that version (Subresource Integrity: sha512, base64).
# A tarball whose hash differs, or a registry that now reports another value, stops the script.
NPM_PACKAGES = {
    "mathjax@3.2.2":
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    "requirejs@2.3.8":
        "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
    "@jupyter-widgets/html-manager@1.0.15":
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
}
# the parts of each package (paths inside it, files or folders) that are extracted into the cache
NPM_PARTS = {"mathjax": ["es5"], "requirejs": ["require.js"], "@jupyter-widgets/html-manager": ["dist"]}
# MathJax loads these parts of its es5 tree lazily (fonts, TeX extensions, menu, accessibility).
MATHJAX_PARTS = ["tex-chtml.js", "input", "output/chtml", "a11y", "sre", "ui", "adaptors"]
SRI_ALGORITHMS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}  # weakest first


class FetchError(RuntimeError):
    """A package could not be fetched, failed its integrity check or holds an unsafe path."""


def check_integrity(data: bytes, integrity: str, package: str) -> None:
    """Raise FetchError unless ``data`` matches the SRI string ``integrity`` ("sha512-<base64>", possibly several
    space-separated hashes; the strongest algorithm present decides, any one of its hashes may match)."""
    hashes: dict[str, list[str]] = {}
    for token in integrity.split():
        alg, _, digest = token.partition("-")
        if alg in SRI_ALGORITHMS and digest:
            hashes.setdefault(alg, []).append(digest.split("?", 1)[0])
    if not hashes:
        raise FetchError(f"{package}: no usable hash in the integrity value {integrity!r}")
    alg = max(hashes, key=list(SRI_ALGORITHMS).index)
    got = base64.b64encode(SRI_ALGORITHMS[alg](data).digest()).decode()
    if got not in hashes[alg]:
        raise FetchError(f"{package}: the tarball fails its integrity check "
                         f"(expected {alg}-{hashes[alg][0]}, got {alg}-{got})")


def safe_extract(tarball: bytes, dest: pathlib.Path, parts: list[str], package: str) -> None:
    """Extract the members of an npm tarball that lie under ``parts`` into ``dest``.

    npm tarballs put everything under one top folder (``package/``), which is dropped. Every member name is
    checked first: an absolute path, a ``..`` component or a link or special file anywhere in the archive
    aborts the extraction. Only regular files are written (mode 0644); each of ``parts`` must be present."""
    dest = dest.resolve()
    found = set()
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            name = m.name.replace("\\", "/")
            pure = pathlib.PurePosixPath(name)
            if name.startswith("/") or ".." in pure.parts or (pure.parts and ":" in pure.parts[0]):
                raise FetchError(f"{package}: unsafe path in the tarball: {m.name!r}")
            if not (m.isfile() or m.isdir()):
                raise FetchError(f"{package}: the tarball holds a link or special file: {m.name!r}")
        for m in members:
            if not m.isfile():
                continue
            rel = pathlib.PurePosixPath(*pathlib.PurePosixPath(m.name.replace("\\", "/")).parts[1:])
            part = next((p for p in parts if rel.as_posix() == p or rel.as_posix().startswith(p + "/")), None)
            if part is None:
                continue
            target = (dest / rel).resolve()
            if dest not in target.parents:
                raise FetchError(f"{package}: tarball member {m.name!r} would land outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(m) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            target.chmod(0o644)
            found.add(part)
    missing = [p for p in parts if p not in found]
    if missing:
        raise FetchError(f"{package}: not in the tarball: {', '.join(missing)}")


def download(url: str, package: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "energylab-vendor-assets",
                                                   "Accept": "application/json, */*"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.read()
    except OSError as err:  # URLError, HTTPError and timeouts are all OSErrors
        raise FetchError(f"{package}: could not download {url}: {err}") from err


def fetch_package(spec: str, integrity: str, cache: pathlib.Path = CACHE) -> pathlib.Path:
    """Return the cache folder of npm package ``spec`` ("name@version"), fetching it first if needed."""
    name, version = spec.rsplit("@", 1)
    parts = NPM_PARTS[name]
    folder = cache / spec
    stamp = folder / ".energylab-complete"
    marker = json.dumps({"integrity": integrity, "parts": parts})
    if stamp.is_file() and stamp.read_text() == marker:
        return folder
    tgz = cache / "tarballs" / f"{spec.replace('/', '+')}.tgz"
    if tgz.is_file():  # e.g. the parts changed: extract again, offline
        data = tgz.read_bytes()
    else:
        meta_url = f"{REGISTRY}/{urllib.parse.quote(name, safe='@')}/{version}"
        try:
            dist = json.loads(download(meta_url, spec))["dist"]
            tarball_url, reported = dist["tarball"], dist["integrity"]
        except (ValueError, KeyError, TypeError) as err:
            raise FetchError(f"{spec}: unexpected registry answer from {meta_url}: {err!r}") from err
        if reported != integrity:
            raise FetchError(f"{spec}: the registry now reports integrity {reported}, "
                             f"but vendor_assets.py pins {integrity}")
        print(f"vendor_assets: downloading {tarball_url}", flush=True)
        data = download(tarball_url, spec)
    try:
        check_integrity(data, integrity, spec)
    except FetchError as err:
        if tgz.is_file():
            raise FetchError(f"{err}; the tarball is the cached {tgz}: delete it to download again") from None
        raise
    tgz.parent.mkdir(parents=True, exist_ok=True)
    if not tgz.is_file():
        tgz.write_bytes(data)
    # extract beside the final folder, then swap it in, so an interrupted run leaves no half-filled cache
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".extract-", dir=folder.parent))
    try:
        safe_extract(data, tmp, parts, spec)
        (tmp / stamp.name).write_text(marker)
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return folder


def copy(src: pathlib.Path, dst: pathlib.Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def main() -> None:
    import plotly

    try:
        pkgs = {spec.rsplit("@", 1)[0]: fetch_package(spec, sri) for spec, sri in NPM_PACKAGES.items()}
    except FetchError as err:
        sys.exit(f"vendor_assets: {err}")
    copy(pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js", VENDOR / "plotly.min.js")
    for part in MATHJAX_PARTS:
        copy(pkgs["mathjax"] / "es5" / part, VENDOR / "mathjax" / part)
    copy(pkgs["requirejs"] / "require.js", VENDOR / "require.js")
    dist = pkgs["@jupyter-widgets/html-manager"] / "dist"
    copy(dist / "embed-amd.js", VENDOR / "html-manager" / "embed-amd.js")
    for font in [*dist.glob("*.woff*"), *dist.glob("*.ttf"), *dist.glob("*.eot"), *dist.glob("*.svg")]:
        copy(font, VENDOR / "html-manager" / font.name)  # icon fonts the widget CSS asks for
    size = sum(f.stat().st_size for f in VENDOR.rglob("*") if f.is_file()) / 2**20
    print(f"vendor_assets: {VENDOR.relative_to(ROOT)} ready ({size:.1f} MiB)")


if __name__ == "__main__":
    main()
