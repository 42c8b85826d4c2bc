"""A throwaway PostgreSQL server for the table-sink tests: Debian's binaries, a temporary data
directory, a free port on 127.0.0.1, trust authentication; stopped and removed at the end.

As root (CI, these machines) the server runs as the ``postgres`` user (``runuser``), which
PostgreSQL requires; as anyone else, as that user.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Optional


def postgres_bin() -> Optional[Path]:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb and pg_ctl (None: none here)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]), reverse=True)
    for initdb in found:
        directory = Path(initdb).parent
        if (directory / "pg_ctl").exists():
            return directory
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    return Path(initdb).parent if initdb and pg_ctl and Path(initdb).parent == Path(pg_ctl).parent else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="wo-postgres-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, text=True, cwd=self.root)

    def start(self) -> str:
        try:
            self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "-E", "UTF8")
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "300", "-l",
                      str(self.root / "log"), "-o",
                      f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
                      "-c synchronous_commit=off -c full_page_writes=off", "start")
        except subprocess.CalledProcessError as exc:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            self.remove()
            raise RuntimeError(f"could not start PostgreSQL: {exc.stderr or exc.stdout}\n{log}") from None
        return self.url

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
