"""Helpers shared by the benchmark's parent and probe processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def compose(overrides: list[str]):
    """hermes_runner/conf/config.yaml composed with Hydra's compose API into a validated RunConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from hermes_runner.config.root import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "hermes_runner" / "conf"), version_base="1.3"):
        return OmegaConf.to_object(hydra_compose(config_name="config", overrides=overrides))


def write_dataset(path: Path, n: int, text: str = "Task {i}: find out what the machine says when asked.") -> Path:
    """A JSONL dataset of `n` distinct prompts without a #script (the default 2-call agent)."""
    with path.open("w") as fp:
        for start in range(0, n, 10_000):
            fp.write(
                "".join(json.dumps({"prompt": text.format(i=i)}) + "\n" for i in range(start, min(n, start + 10_000)))
            )
    return path


def busy_seconds() -> float:
    """CPU-seconds all processes on this machine have used so far (from /proc/stat)."""
    with open("/proc/stat") as fp:
        f = [int(x) for x in fp.readline().split()[1:]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


class ScriptedServerProcess:
    """`python -m hermes_runner.testing.scripted_server` in its own process, with its CPU use."""

    def __init__(self, latency: float, log: Path):
        self.latency = latency
        self._log = log
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> ScriptedServerProcess:
        self.proc = subprocess.Popen(
            [PY, "-m", "hermes_runner.testing.scripted_server", "--port", "0", "--latency", str(self.latency)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._log.open("w"),
            text=True,
        )
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"scripted server did not start (see {self._log})")
        self.url = line.split()[-1]
        self._ps = psutil.Process(self.proc.pid)
        return self

    def stats(self, reset: bool = False) -> dict:
        """Calls served and the monotonic times of the first request and last reply (see scripted_server)."""
        root = self.url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(f"{root}/_stats{'?reset=1' if reset else ''}", timeout=10) as resp:
            return json.load(resp)

    def cpu_seconds(self) -> float:
        t = self._ps.cpu_times()
        return t.user + t.system

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def probe(
    out: Path, args: list[str], log: Path, env: dict | None = None, timeout: float = 1800
) -> tuple[dict, float, float, int]:
    """Run `python -m bench.probe out args...`; return (its usage report, start, end, exit code).

    Start and end are `time.monotonic()` readings, comparable with the scripted server's.
    """
    start = time.monotonic()
    with log.open("w") as fp:
        proc = subprocess.run(
            [PY, "-m", "bench.probe", str(out), *args],
            cwd=ROOT,
            stdout=fp,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
    end = time.monotonic()
    report = json.loads(out.read_text()) if out.exists() else {}
    return report, start, end, proc.returncode
