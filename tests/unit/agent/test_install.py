"""agent.install: a directory bound into the sandbox as it is, a venv's base Python and version found."""

from __future__ import annotations

import os

import pytest

from hermes_runner.agent.install import BOX_PROXY_DIR, Install, resolve, sandbox_with
from hermes_runner.config import SandboxConfig
from hermes_runner.errors import ConfigError


def _venv(tmp_path, home: str):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
    meta = venv / "lib" / "python3.11" / "site-packages" / "mini_swe_agent-2.4.6.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Name: mini-swe-agent\n")
    return venv


def test_a_venv_is_bound_with_its_base_python_and_gives_its_version(tmp_path):
    venv = _venv(tmp_path, "/root/.pyenv/versions/3.11.7/bin")
    got = resolve(str(venv), "mini-swe-agent")
    assert got == Install(
        [str(venv), "/root/.pyenv/versions/3.11.7"], str(venv / "bin"), "2.4.6", str(venv / "bin/python")
    )
    system = resolve(str(_venv(tmp_path / "s", "/usr/bin")), None)
    assert len(system.binds) == 1 and system.version == ""  # a system Python is in the sandbox already


def test_a_path_that_is_no_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is not an absolute path of a directory"):
        resolve("relative/venv", None)
    with pytest.raises(ConfigError, match="is not an absolute path"):
        resolve(str(tmp_path / "missing"), None)


def test_the_sandbox_section_gets_the_binds_and_a_container_the_proxy_dir(tmp_path):
    install = Install([str(tmp_path)], str(tmp_path), "", "python3")
    local, share = sandbox_with(SandboxConfig(), install)
    assert local.local.system_paths[-1] == str(tmp_path) and share is None
    box, share = sandbox_with(SandboxConfig(backend="docker"), install)
    try:
        assert box.docker.volumes == [f"{tmp_path}:{tmp_path}:ro", f"{share[0]}:{BOX_PROXY_DIR}:ro"]
    finally:
        os.rmdir(share[0])
