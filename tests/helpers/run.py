"""Plain helpers every test module may import: config composition, the CLI, JSONL files, scripted prompts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from hermes_runner.commands.job import run_and_print
from hermes_runner.config.root import RunConfig, register_configs
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
CONF = ROOT / "hermes_runner" / "conf"
register_configs()


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
        "cache=off",  # each test's replies are scripted: none is replayed from another's (tests/e2e/test_cache.py)
    ]


def compose_cfg(overrides: list[str]) -> RunConfig:
    """Compose hermes_runner/conf/config.yaml with Hydra's compose API into a validated RunConfig."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.to_object(dcfg)


def run_inprocess(cfg: RunConfig, run_dir: Path) -> tuple[int, dict | None]:
    return run_and_print(cfg, run_dir)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def command(name: str) -> list[str]:
    """argv of the console command `hermes-<name>` as this checkout has it (an installed script may be another's)."""
    return [sys.executable, "-c", f"import sys; from hermes_runner.commands.{name} import main; sys.exit(main())"]


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


class LiveRunner:
    """`python run.py ...` in a subprocess whose output is read as it comes (a full pipe never holds it up),
    for tests that act on it while it runs (kill -9, Ctrl-C) and say what it printed when it did not get there."""

    def __init__(self, args: list[str], env: dict | None = None, **popen):
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, **popen)  # fmt: skip
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def wait_for(self, pred, timeout: float, what: str, state=None) -> None:
        """Until pred() holds; fails at once if the runner exits first, and at the timeout with what `state()` says
        and the runner's output, ending with its SIGUSR1 report (its threads' stacks and tasks' awaits)."""

        def gone() -> str | None:
            if self.proc.poll() is None:
                return None
            self._reader.join(5)
            return f"the runner exited ({self.proc.returncode})"

        try:
            wait_for(pred, timeout, what, state=state, gone=gone, interval=0.2)
        except WaitTimeout as exc:
            self.proc.send_signal(signal.SIGUSR1)  # where it waits (hermes_runner/util/stacks.py), then the rest
            with contextlib.suppress(WaitTimeout):  # the report, or as much of it as comes in 5 s
                wait_for(lambda: "asyncio tasks:" in self.output or self.proc.poll() is not None, 5, interval=0.1)
            raise AssertionError(f"{exc}; the runner printed:\n{self.output}") from None
        except AssertionError as exc:
            raise AssertionError(f"{exc}:\n{self.output}") from None

    def end(self, sig: int, timeout: float = 60) -> tuple[int, str]:
        """Send `sig` to the runner; (its exit code, all it printed)."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=timeout)
        self._reader.join(10)
        return self.proc.returncode, self.output

    def __enter__(self) -> LiveRunner:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
