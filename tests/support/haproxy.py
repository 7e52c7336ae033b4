"""HAProxy from the Debian package in front of child `arena serve` nodes, run from the repository's
own `deploy/haproxy.cfg`: `render` substitutes the addresses, ports and paths of a test (every
directive kept, each substitution checked to apply), `HAProxy` runs it in a child process and
reads which nodes it sees up from its stats socket. Under CI a missing `haproxy` fails the test."""

from __future__ import annotations

import csv
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from loadtest.process import Child, free_port

DEPLOYED = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"


def binary() -> str:
    """The `haproxy` program; fails the test under CI (skips elsewhere) when it is missing."""
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.path.exists(p)), None)
    if found is None:
        message = "haproxy is not installed (apt-get install haproxy; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def certificate(directory: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 and its key in one PEM file, as HAProxy's `crt`
    takes it (made with the openssl command line)."""
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    pem = directory / "arena.pem"
    pem.write_text(cert.read_text() + key.read_text())
    return pem


def _substitute(text: str, pattern: str, replacement: str, count: int = 1) -> str:
    """``text`` with ``pattern`` (a regex, one per line) replaced; exactly ``count`` lines must
    match, so that the test fails when the deployed file changes under it."""
    new, made = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    assert made == count, f"deploy/haproxy.cfg: {made} lines match {pattern!r}, expected {count}"
    return new


def render(text: str, *, https_port: int, http_port: int, nodes: Sequence[int], pem: Path, stats: Path) -> str:
    """deploy/haproxy.cfg for a test on loopback: the frontend on ``https_port`` (TLS with
    ``pem``) and ``http_port``, the servers on ``nodes`` ports, the stats socket at ``stats``,
    the log on stdout. Not as root, the privilege drop (user, group, chroot) is left out."""
    text = _substitute(text, r"^(\s*)log /dev/log (\S+)$", r"\1log stdout format raw \2")
    text = _substitute(text, r"^(\s*stats socket )\S+", rf"\g<1>{stats}")
    text = _substitute(text, r"^(\s*bind ):443 ssl crt \S+", rf"\g<1>127.0.0.1:{https_port} ssl crt {pem}")
    text = _substitute(text, r"^(\s*bind ):80$", rf"\g<1>127.0.0.1:{http_port}")
    for name, port in zip(("node-a", "node-b", "node-c"), nodes, strict=True):
        text = _substitute(text, rf"^(\s*server {name} )\S+", rf"\g<1>127.0.0.1:{port}")
    if os.geteuid() != 0:
        text = _substitute(text, r"^\s*(user|group|chroot) .*\n", "", count=3)
    return text


class HAProxy(Child):
    """``haproxy -db -f CONFIG`` (in the foreground, its log on stdout) in a child process, its
    config, its log and its stats socket in ``directory``, in front of the ``nodes`` ports:
    deploy/haproxy.cfg rendered for a free HTTPS port (`port`) and a free plain HTTP port."""

    def __init__(self, directory: Path, nodes: Sequence[int]) -> None:
        super().__init__("haproxy")
        self.directory = directory
        self.nodes = list(nodes)
        self.config = directory / "haproxy.cfg"
        self.stats = directory / "stats.sock"
        self.http_port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        """Check the rendered config with `haproxy -c` (the test fails with HAProxy's own words),
        then run it until its stats socket answers."""
        pem = certificate(self.directory)

        def spawn(port: int) -> None:
            self.http_port = free_port()
            self.config.write_text(render(DEPLOYED.read_text(), https_port=port, http_port=self.http_port,
                                          nodes=self.nodes, pem=pem, stats=self.stats))
            done = subprocess.run([binary(), "-c", "-f", str(self.config)], capture_output=True, text=True)
            assert done.returncode == 0, f"haproxy -c -f {self.config}:\n{done.stdout}{done.stderr}"
            self._spawn([binary(), "-db", "-f", str(self.config)], self.directory / "haproxy.log",
                        lambda: bool(self.servers()), timeout=timeout)

        self._spawn_on(None, spawn)

    def servers(self) -> dict[str, str]:
        """Server name -> status (`UP`, `DOWN`, `UP 1/2` while rising…) in the backend, as the
        stats socket says; empty while it does not answer."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect(str(self.stats))
                sock.sendall(b"show stat\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
        except OSError:
            return {}
        rows = csv.DictReader(data.decode().removeprefix("# ").splitlines())
        return {r["svname"]: r["status"] for r in rows if r["pxname"] == "arena" and r["svname"] not in ("FRONTEND", "BACKEND")}
