"""Shared fixtures: a real scripted OpenAI-compatible server, Hydra-composed configs, the CLI."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hermes_runner.config.root import RunConfig
from hermes_runner.model import cache
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers import system
from tests.helpers.machine import _missing, require
from tests.helpers.run import base_overrides, compose_cfg

# -- what the machine must provide (tests/helpers/system.py; `make test` installs it as root) --------------
# A test marked @pytest.mark.docker / browser / bwrap, or a fixture calling require(name), fails with the
# missing piece and how to install it; HERMES_SKIP_DOCKER=1 (..._BROWSER, ..._BWRAP, ..._SLURM) makes it skip instead.


def pytest_configure(config: pytest.Config) -> None:
    # A run a test starts without base_overrides (its cache on) keeps its replies in a dir of this session, never
    # in the user's cache; subprocesses inherit it.
    os.environ[cache.ENV_DIR] = tempfile.mkdtemp(prefix="hermes-test-cache-")
    for req in system.REQUIREMENTS:
        config.addinivalue_line("markers", f"{req.name}: needs {req.purpose} ({req.opt_out}=1 skips)")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop(cache.ENV_DIR, ""), ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_response_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test's default cache dir is its own: no test is answered with another's scripted replies."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path_factory.mktemp("response-cache")))


E2E = Path(__file__).parent / "e2e"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The quick tier (`-m "not e2e"` exactly) does not even import the e2e modules: it deselects them all."""
    if config.option.markexpr.strip() == "not e2e" and collection_path.is_relative_to(E2E):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ is marked `e2e`: `pytest -m "not e2e"` is the quick tier."""
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)


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
    return lines or ["system: bubblewrap, Chromium, Docker, Podman with the test images, and SLURM are all there"]


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


@pytest.fixture
def make_cfg(server: ScriptedServer, tmp_path: Path) -> Callable[..., RunConfig]:
    def make(*overrides: str, dataset: Path | None = None) -> RunConfig:
        extra = [f"dataset_file={dataset}"] if dataset else []
        return compose_cfg(base_overrides(server, tmp_path) + ["run_name=t"] + extra + list(overrides))

    return make


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


# -- toolset tests: a local web site and a config with every toolset configured against local services --


@pytest.fixture(scope="module")
def local_site():
    """A real local web site (pages, PDF, images, search endpoints), see tests/helpers/local_site.py."""
    from tests.helpers.local_site import LocalSite

    site = LocalSite().start()
    yield site
    site.stop()


@pytest.fixture
def tools_cfg(server: ScriptedServer, local_site, tmp_path: Path) -> Callable[..., RunConfig]:
    """`tools_cfg(*overrides)`: a RunConfig with all toolsets configured (tests/helpers/tool_harness.py)."""
    from tests.helpers.tool_harness import make_tools_cfg

    return lambda *o: make_tools_cfg(server, local_site, tmp_path, *o)
