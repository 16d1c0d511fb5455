"""Shared fixtures: a real scripted OpenAI-compatible server, Hydra-composed configs, the CLI."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from hermes_runner.cli import execute_run
from hermes_runner.config import RunConfig, register_configs
from hermes_runner.testing.scripted_server import ScriptedServer
from tests.helpers import system

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
register_configs()


# -- what the machine must provide (tests/helpers/system.py; `make test` installs it as root) --------------
# A test marked @pytest.mark.docker / browser / bwrap, or a fixture calling require(name), fails with the
# missing piece and how to install it; HERMES_SKIP_DOCKER=1 (..._BROWSER, ..._BWRAP) makes it skip instead.


def pytest_configure(config: pytest.Config) -> None:
    for req in system.REQUIREMENTS:
        config.addinivalue_line("markers", f"{req.name}: needs {req.purpose} ({req.opt_out}=1 skips)")


@functools.cache
def _missing(name: str) -> str | None:
    req = system.BY_NAME[name]
    return system.explain(req, missing) if (missing := req.missing()) else None


def require(name: str) -> None:
    """Fail the current test (or skip it, when its opt-out variable is set) if requirement `name` is missing."""
    req = system.BY_NAME[name]
    if req.opted_out():
        pytest.skip(f"{req.opt_out}=1: {req.purpose} not required")
    if (msg := _missing(name)) is not None:
        pytest.fail(msg, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for req in system.REQUIREMENTS:
        if item.get_closest_marker(req.name):
            require(req.name)


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    for req in system.REQUIREMENTS:
        if req.opted_out():
            lines.append(f"system: {req.name} tests skip ({req.opt_out}=1)")
        elif (msg := _missing(req.name)) is not None:
            lines.append(f"system: MISSING {req.name}, its tests will fail: {msg}")
    return lines or ["system: bubblewrap, Chromium, Docker and the test images are all there"]


@pytest.fixture(scope="session")
def _server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    yield server
    server.stop()


@pytest.fixture
def server(_server: ScriptedServer) -> ScriptedServer:
    """The scripted endpoint, reset for this test."""
    _server.reset()
    _server.latency = 0.0
    return _server


def write_jsonl(path: Path, rows: list) -> Path:
    """Rows are dicts (dumped as JSON) or raw strings (written as they are)."""
    with path.open("w") as fp:
        for row in rows:
            fp.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def script(*steps: dict, text: str = "task") -> str:
    """A prompt whose assistant turns follow `steps` (see hermes_runner.testing.scripted_server)."""
    return f"{text}\n#script {json.dumps(list(steps))}"


def base_overrides(server: ScriptedServer, tmp_path: Path) -> list[str]:
    return [
        "model=local_server",
        f"model.base_url={server.url}",
        "model.retry_initial_wait_s=0.01",
        "progress=false",
        f"sandbox.local.root={tmp_path / 'sandboxes'}",
    ]


def compose_cfg(overrides: list[str]) -> RunConfig:
    """Compose conf/config.yaml with Hydra's compose API into a validated RunConfig."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.to_object(dcfg)


@pytest.fixture
def make_cfg(server: ScriptedServer, tmp_path: Path) -> Callable[..., RunConfig]:
    def make(*overrides: str, dataset: Path | None = None) -> RunConfig:
        extra = [f"dataset_file={dataset}"] if dataset else []
        return compose_cfg(base_overrides(server, tmp_path) + ["run_name=t"] + extra + list(overrides))

    return make


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


def run_inprocess(cfg: RunConfig, run_dir: Path) -> tuple[int, dict | None]:
    return execute_run(cfg, run_dir)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_cli(*args: str, cwd: Path = ROOT, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python run.py ...` in a subprocess, as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})},
    )


# -- toolset tests: a local web site and a config with every toolset configured against local services --


@pytest.fixture(scope="module")
def local_site():
    """A real local web site (pages, PDF, images, search endpoints), see tests/local_site.py."""
    from local_site import LocalSite

    site = LocalSite().start()
    yield site
    site.stop()


@pytest.fixture
def tools_cfg(server: ScriptedServer, local_site, tmp_path: Path) -> Callable[..., RunConfig]:
    """`tools_cfg(*overrides)`: a RunConfig with all toolsets configured (tests/tool_harness.py)."""
    from tool_harness import make_tools_cfg

    return lambda *o: make_tools_cfg(server, local_site, tmp_path, *o)
