"""scripts/vendor_assets.py: integrity check and safe extraction of npm tarballs (built here; no network)."""
import base64
import hashlib
import importlib.util
import io
import pathlib
import tarfile

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "vendor_assets.py"
spec = importlib.util.spec_from_file_location("vendor_assets", SCRIPT)
va = importlib.util.module_from_spec(spec)
spec.loader.exec_module(va)


def sri(data: bytes, alg: str = "sha512") -> str:
    return f"{alg}-" + base64.b64encode(hashlib.new(alg, data).digest()).decode()


def make_tarball(files: dict, links: dict = None) -> bytes:
    """A gzipped tarball: ``files`` maps member name -> bytes; ``links`` maps member name -> symlink target."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def test_integrity_accepts_matching_hash():
    data = b"some tarball bytes"
    va.check_integrity(data, sri(data), "pkg@1.0.0")
    # several hashes: the strongest algorithm decides, a weaker wrong one is ignored
    va.check_integrity(data, f"sha256-{'A' * 43}= {sri(data)}", "pkg@1.0.0")


def test_integrity_rejects_other_data_naming_the_package():
    with pytest.raises(va.FetchError, match=r"pkg@1\.0\.0: the tarball fails its integrity check"):
        va.check_integrity(b"tampered", sri(b"original"), "pkg@1.0.0")
    with pytest.raises(va.FetchError, match="pkg@1.0.0"):  # sha512 present and wrong: a right sha256 is not enough
        va.check_integrity(b"x", f"{sri(b'x', 'sha256')} {sri(b'y')}", "pkg@1.0.0")
    with pytest.raises(va.FetchError, match="no usable hash"):
        va.check_integrity(b"x", "md5-abc", "pkg@1.0.0")


def test_pinned_integrity_values_are_sha512():
    for spec_, integrity in va.NPM_PACKAGES.items():
        alg, _, digest = integrity.partition("-")
        assert alg == "sha512" and len(base64.b64decode(digest)) == 64, spec_
        assert spec_.rsplit("@", 1)[0] in va.NPM_PARTS


def test_safe_extract_strips_package_folder_and_keeps_only_parts(tmp_path):
    tgz = make_tarball({"package/package.json": b"{}", "package/dist/embed-amd.js": b"js",
                        "package/dist/fonts/a.woff": b"font", "package/src/index.ts": b"ts",
                        "package/distant.js": b"not dist"})
    va.safe_extract(tgz, tmp_path, ["dist"], "pkg@1.0.0")
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["dist/embed-amd.js", "dist/fonts/a.woff"]
    assert (tmp_path / "dist" / "embed-amd.js").read_bytes() == b"js"


@pytest.mark.parametrize("name", ["package/../../evil.js", "/etc/evil.js", "package/dist/../../evil.js",
                                  "..\\evil.js"])
def test_safe_extract_rejects_path_traversal(tmp_path, name):
    dest = tmp_path / "dest"
    dest.mkdir()
    tgz = make_tarball({"package/dist/ok.js": b"ok", name: b"evil"})
    with pytest.raises(va.FetchError, match=r"pkg@1\.0\.0: unsafe path"):
        va.safe_extract(tgz, dest, ["dist"], "pkg@1.0.0")
    assert not list(tmp_path.rglob("evil.js")) and not list(dest.rglob("*"))  # nothing written


def test_safe_extract_rejects_links(tmp_path):
    tgz = make_tarball({"package/dist/ok.js": b"ok"}, links={"package/dist/passwd": "/etc/passwd"})
    with pytest.raises(va.FetchError, match="link or special file"):
        va.safe_extract(tgz, tmp_path, ["dist"], "pkg@1.0.0")
    assert not list(tmp_path.rglob("*"))


def test_safe_extract_requires_every_part(tmp_path):
    tgz = make_tarball({"package/dist/ok.js": b"ok"})
    with pytest.raises(va.FetchError, match="not in the tarball: require.js"):
        va.safe_extract(tgz, tmp_path, ["dist", "require.js"], "pkg@1.0.0")


def test_fetch_package_uses_cached_tarball_offline(tmp_path, monkeypatch):
    """A cached, verified tarball is extracted with no network; a corrupted one is refused with a clear message."""
    tgz = make_tarball({"package/require.js": b"define()", "package/bin/r.js": b"r"})
    monkeypatch.setattr(va, "download", lambda url, package: pytest.fail(f"network used: {url}"))
    cached = tmp_path / "tarballs" / "requirejs@9.9.9.tgz"
    cached.parent.mkdir()
    cached.write_bytes(tgz)
    folder = va.fetch_package("requirejs@9.9.9", sri(tgz), cache=tmp_path)
    assert (folder / "require.js").read_bytes() == b"define()" and not (folder / "bin").exists()
    assert va.fetch_package("requirejs@9.9.9", sri(tgz), cache=tmp_path) == folder  # complete: nothing to do
    cached.write_bytes(tgz[:-1] + bytes([tgz[-1] ^ 1]))
    va.shutil.rmtree(folder)
    with pytest.raises(va.FetchError, match="requirejs@9.9.9: the tarball fails.*delete it"):
        va.fetch_package("requirejs@9.9.9", sri(tgz), cache=tmp_path)
    assert not folder.exists()
