"""The deployment files in deploy/ are checked by their own tools: the systemd unit by
`systemd-analyze verify`, the Prometheus rules by `promtool check rules`, and every series the
rules name is one docs/metrics.md documents. (deploy/haproxy.cfg runs for real in
tests/cluster/test_load_balancer.py.) Under CI a missing tool fails the test, never skips it:
.ci/run installs them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PACKAGES = {"systemd-analyze": "systemd", "promtool": "prometheus"}


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed (apt-get install {PACKAGES[name]}; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    unit = (DEPLOY / "arena.service").read_text()
    deployed = re.search(r"^ExecStart=(\S+) serve --config ", unit, re.MULTILINE)
    assert deployed is not None, "ExecStart runs `arena serve --config …`"
    for key in ("User=arena", "KillSignal=SIGTERM", "Restart=on-failure", "EnvironmentFile=", "NoNewPrivileges=yes"):
        assert re.search(rf"^{key}", unit, re.MULTILINE), key
    stop = re.search(r"^TimeoutStopSec=(\d+)$", unit, re.MULTILINE)
    assert stop is not None and int(stop.group(1)) > 5 + 15, "longer than drain_seconds (5) and the connections' drain (15 s)"
    # verify wants the program to exist: this venv's `arena` stands in for the deployed one
    arena = Path(sys.executable).parent / "arena"
    assert arena.exists(), f"{arena}: install the package (pip install -e .)"
    rendered = tmp_path / "arena.service"
    rendered.write_text(unit.replace(deployed.group(1), str(arena)))
    done = subprocess.run([tool("systemd-analyze"), "verify", str(rendered)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_the_alert_rules_pass_promtool_and_name_only_documented_series() -> None:
    rules = DEPLOY / "prometheus" / "alerts.yml"
    done = subprocess.run([tool("promtool"), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    documented = (ROOT / "docs" / "metrics.md").read_text()
    named = {re.sub(r"_(bucket|count|sum)$", "", name) for name in re.findall(r"\barena_\w+", rules.read_text())}
    assert named, "the rules name Arena's series"
    missing = sorted(name for name in named if f"`{name}`" not in documented)
    assert missing == [], f"series in deploy/prometheus/alerts.yml that docs/metrics.md does not document: {missing}"
