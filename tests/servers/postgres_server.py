"""Start and stop a real PostgreSQL server (Debian's ``postgresql`` package) on loopback.

``initdb`` makes a fresh cluster in a temporary directory, ``pg_ctl`` starts it on a free port
with trust authentication for loopback only. PostgreSQL refuses to run as root, so as root the
cluster belongs to, and runs as, the unprivileged user ``nobody`` (``runuser``).

Usage::

    with PostgresServer() as pg:
        pg.url            # postgresql://casebench@127.0.0.1:PORT/postgres
        pg.create_database("study1")  -> its URL
        pg.restart()      # pg_ctl restart -m fast (open connections are cut)
        pg.stop(); pg.start()
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = ("PostgreSQL server binaries are not installed (Debian: apt-get install postgresql; "
                "`make test-deps` does it as root)")


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<ver>/bin holding initdb and pg_ctl, or PATH's."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, user: str = "casebench") -> None:
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError(INSTALL_HINT)
        self.bindir = bindir
        self.user = user
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="casebench-pg-"))
        self.datadir = self.root / "data"
        self.logfile = self.root / "server.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, "nobody")

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_root:
            cmd = ["runuser", "-u", "nobody", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout, cwd=self.root)

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def start(self) -> "PostgresServer":
        if not self.datadir.exists():
            self._run("initdb", "-D", str(self.datadir), "-U", self.user, "--auth=trust", "-E", "UTF8",
                      "--locale=C.UTF-8", "--no-sync")
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
                "-c max_connections=200 -c fsync=on -c shared_buffers=64MB")
        proc = self._run("pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-o", opts, "-w", "-t", "60",
                         "start", check=False)
        if proc.returncode != 0:
            log = self.logfile.read_text() if self.logfile.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {proc.stderr}\n{log[-2000:]}")
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self._run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False, timeout=10)
            if r.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("PostgreSQL did not become ready")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)
        return self.database_url(name)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
