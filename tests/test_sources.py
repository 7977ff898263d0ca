"""The dataset download, against a real HTTP server on loopback."""

import functools
import hashlib
import http.server
import threading

import pytest

from casebench.sources import FetchError, cached_dataset_path, fetch_dataset, resolve_dataset


@pytest.fixture()
def http_dir(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_download_checks_sha256(http_dir, tmp_path, small_data_path):
    root, base = http_dir
    body = small_data_path.read_bytes()
    (root / "data.json").write_bytes(body)
    dest = tmp_path / "cache" / "CASEBench_data.json"
    got = fetch_dataset(url=f"{base}/data.json", dest=dest, sha256=hashlib.sha256(body).hexdigest())
    assert got == dest and dest.read_bytes() == body


def test_checksum_mismatch_keeps_nothing(http_dir, tmp_path):
    root, base = http_dir
    (root / "data.json").write_bytes(b"[]")
    dest = tmp_path / "cache" / "d.json"
    with pytest.raises(FetchError, match="checksum mismatch"):
        fetch_dataset(url=f"{base}/data.json", dest=dest, sha256="0" * 64)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_http_error_keeps_nothing(http_dir, tmp_path):
    _, base = http_dir
    dest = tmp_path / "d.json"
    with pytest.raises(FetchError, match="cannot download"):
        fetch_dataset(url=f"{base}/missing.json", dest=dest)
    assert [x.name for x in tmp_path.iterdir()] == ["www"]  # no file, no temp file


def test_the_real_file_served_locally_matches_the_pin(http_dir, tmp_path, real_data_path):
    root, base = http_dir
    (root / "CASEBench_data.json").write_bytes(real_data_path.read_bytes())
    dest = fetch_dataset(url=f"{base}/CASEBench_data.json", dest=tmp_path / "d.json")  # pinned sha256
    assert dest.stat().st_size == real_data_path.stat().st_size


def test_resolution_order(tmp_path, monkeypatch, small_data_path):
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CASEBENCH_DATA", raising=False)
    assert resolve_dataset(str(small_data_path)).origin == "argument"
    monkeypatch.setenv("CASEBENCH_DATA", str(small_data_path))
    assert resolve_dataset(None).origin == "environment"
    monkeypatch.delenv("CASEBENCH_DATA")
    choice = resolve_dataset(None, allow_download=False)
    assert choice.is_demo and choice.path.is_file()
    cached = cached_dataset_path()
    cached.parent.mkdir(parents=True)
    cached.write_bytes(small_data_path.read_bytes())
    assert resolve_dataset(None, allow_download=False).origin == "cache"


def test_demo_set_is_valid_and_has_no_invented_votes():
    from casebench.data import load_dataset
    from casebench.sources import demo_dataset_path

    ds = load_dataset(demo_dataset_path())
    assert len(ds) == 12
    for c in ds:
        assert c.votes == () and c.safe_rate == (1.0 if c.intended_safe else 0.0)


def _cli(args, env):
    """``casebench ARGS`` in a child process (so the proxy settings below are the only way out)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    full = {**os.environ, **env, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", "import sys; from casebench.cli import main; sys.argv[0] = "
                           "'casebench'; main()", *args], env=full, capture_output=True, text=True, timeout=300)


def test_data_fetch_with_a_complete_cache_succeeds_offline_and_says_so(tmp_path, real_data_path, exp_dir):
    """Issue 37, item 3: every file in the cache with its checksum: `casebench data fetch` asks no
    network (every request would go to a closed port, through the proxy settings) and says that
    nothing was downloaded; a damaged file makes it try, fail, and say what to do offline."""
    import shutil
    import socket

    from casebench.sources import PUBLISHED_OUTPUTS

    cache = tmp_path / "cache"
    env = {"CASEBENCH_CACHE": str(cache), "CASEBENCH_DATA": ""}
    with socket.socket() as s:  # a port where nothing listens: the network is unreachable
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[var] = dead
    env["no_proxy"] = env["NO_PROXY"] = ""
    data = cache / "data" / "CASEBench_data.json"
    data.parent.mkdir(parents=True)
    shutil.copyfile(real_data_path, data)
    outputs_root = cache / "published"
    for rel in PUBLISHED_OUTPUTS:
        src = exp_dir.parent / rel
        if not src.is_file():
            pytest.skip(f"{rel} is not in ../shared/casebench")
    r = _cli(["data", "fetch"], env)
    assert r.returncode == 1  # the outputs are not cached yet: it tried the network and says how to do without
    assert "No network? Instead" in r.stderr
    root = next(outputs_root.iterdir())  # the folder fetch_outputs writes into (named by the pinned commit)
    assert not any(root.rglob("*.json"))  # nothing half-written
    for rel in PUBLISHED_OUTPUTS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(exp_dir.parent / rel, root / rel)
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    r = _cli(["data", "fetch"], env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(data), str(root)]
    assert "the dataset was already there with its SHA-256 checked: nothing downloaded" in r.stderr
    assert f"all {len(PUBLISHED_OUTPUTS)} files already there with their SHA-256 checked" in r.stderr
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()} == before
    # a damaged file is fetched again (here: offline, so it fails and says so)
    first = root / next(iter(PUBLISHED_OUTPUTS))
    first.write_text("[]")
    r = _cli(["data", "fetch"], env)
    assert r.returncode == 1 and "cannot download" in r.stderr and "No network? Instead" in r.stderr
