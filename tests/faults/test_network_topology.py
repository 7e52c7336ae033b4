"""The network fault harness's safety (`support.netns`): a test namespace that could route a
packet off the machine is refused before anything starts in it, and a topology leaves nothing
behind."""

from __future__ import annotations

import ipaddress

import pytest

from support.netns import Topology, UnsafeTopology, ip, root_and_ip, unsafe_routes

SUBNET = ipaddress.IPv4Network("10.213.20.0/24")


def test_only_routes_inside_the_subnet_are_safe() -> None:
    fine = [{"dst": "10.213.20.0/24", "dev": "eth0"}, {"dst": "10.213.20.3", "type": "local"},
            {"dst": "10.213.20.5", "type": "blackhole"}, {"dst": "fe80::/64", "dev": "eth0"}, {"dst": "ff00::/8", "type": "multicast"}]
    assert unsafe_routes(fine, SUBNET) == []
    bad = [{"dst": "default", "gateway": "10.213.20.1"}, {"dst": "192.0.2.0/24", "dev": "eth0"}, {"dst": "10.213.0.0/16"},
           {"dst": "default", "type": "blackhole"}, {"dst": "2001:db8::/32"}]
    assert len(unsafe_routes(bad, SUBNET)) == len(bad)


def test_a_namespace_with_a_default_route_is_refused() -> None:
    root_and_ip()
    topology = Topology()
    try:
        topology.start()
        host = topology.add_host("node-a")
        topology.check_routes()
        ip("route", "add", "default", "via", topology.client_address, namespace=host.namespace)
        with pytest.raises(UnsafeTopology, match="default"):
            topology.check_routes()
        with pytest.raises(UnsafeTopology):
            topology.exec_prefix("node-a")  # nothing is started in it
    finally:
        topology.close()
    assert f"arena-{topology.tag}" not in ip("netns", "list")
    assert f"arena{topology.tag}" not in ip("link")
    assert str(topology.subnet) not in ip("route")
