"""The command as a user meets it (issue 20): the help page, exit 2 with one line for a bad config, `+key`
typos, bash completion, a wheel's `hermes-runner` from another directory, errors that say what happened."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.helpers.run import ROOT, base_overrides, read_jsonl, run_cli, write_jsonl

PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable


def _help() -> str:
    res = run_cli("--help")
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_help_is_the_apps_page_without_schema_entries():
    page = _help()
    assert page.startswith("hermes-runner: run a tool-using LLM agent")
    assert "_schema" not in page and "powered by Hydra" not in page
    groups = page.split("== Config groups", 1)[1].split("== Options", 1)[0]
    for group in ("model", "distribution", "sandbox", "executor", "experiment", "reasoning", "provider", "filters"):
        assert re.search(rf"^  {group} ", groups, re.M), group
    assert "smollm2*" in groups and "openrouter" in groups and "quickstart" in groups
    assert "num_workers=4" in page and "limits.timeout_s=null" in page
    assert len(_examples(page)) == 3
    assert len(page.splitlines()) < 150  # not Hydra's page plus a 300-line config dump


def _examples(page: str) -> list[str]:
    block = page.split("== Examples ==", 1)[1].split("==", 1)[0]
    return [ln.strip() for ln in block.splitlines() if ln.strip().startswith("hermes-runner")]


def test_help_examples_compose():
    """Each example of the page composes (a multirun one: every job of it)."""
    for example in _examples(_help()):
        _composes(shlex_split(example)[1:])


def shlex_split(line: str) -> list[str]:
    import shlex

    return shlex.split(line, comments=True)


def _composes(args: list[str], cwd: Path = ROOT, env: dict | None = None) -> None:
    """`--cfg job` of a single run; for `-m`, `--cfg job` of each job the sweep expands to."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if "-m" not in args and "--multirun" not in args:
        jobs = [args]
    else:
        overrides = [a for a in args if a not in ("-m", "--multirun")]
        parsed = OverridesParser.create().parse_overrides(overrides)
        jobs = BasicSweeper.split_arguments(parsed, max_batch_size=None)[0]
    for job in jobs:
        res = run_cli("--cfg", "job", *job, cwd=cwd, env=env)
        assert res.returncode == 0, f"{job}: {res.stderr[-1500:]}"


def _documented_commands() -> list[tuple[str, str]]:
    """Every `python run.py` / `hermes-runner` command in a shell block of the README and docs/."""
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        # (fences paired in order, so a block's closing fence never opens the next "block" of prose)
        for lang, block in re.findall(r"^ *```(\w*)\n(.*?)^ *```\s*$", doc.read_text(), re.S | re.M):
            if lang not in ("", "bash", "sh", "shell"):
                continue
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip()
                if re.match(r"([A-Z_]+=\S*\s+)*(\S*python\S* run\.py|hermes-runner)(\s|$)", line):
                    out.append((doc.name, line))
    return out


@pytest.mark.parametrize(("doc", "command"), _documented_commands())
def test_documented_command_composes(doc, command, tmp_path):
    """The command as written (the shell expands it: $HOME, quotes) parses and composes; `~` is not allowed
    unquoted by Hydra's override grammar, which this catches."""
    expanded = subprocess.run(  # the user's shell: $HOME, quotes and a trailing # comment as bash sees them
        ["bash", "-c", f'set -- {command}\nprintf "%s\\0" "$@"'], capture_output=True, text=True, cwd=ROOT
    )
    assert expanded.returncode == 0, expanded.stderr
    argv = [w for w in expanded.stdout.split("\0") if w and w != "..."]  # (`...`: an earlier command's options)
    start = next(i for i, w in enumerate(argv) if w.endswith("run.py") or w == "hermes-runner") + 1
    _composes(argv[start:])


def test_readme_documents_no_bare_tilde_override():
    for doc, command in _documented_commands():
        assert not re.search(r"=~/", command), f"{doc}: {command}"


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("num_worker=8", "error: num_worker: no such option at the top level; did you mean num_workers?"),
        ("+num_worker=8", "error: unknown option: num_worker (no such option at the top level; did you mean num_workers?)"),
        ("model.nme=x", "error: model.nme: no such option in model; did you mean name?"),
        ("num_workers=x", "error: Error merging override num_workers=x: Value 'x' of type 'str' could not be converted to Integer"),
        ("model=nope", "error: Could not find 'model/nope': the options of model are gguf, llama_server, local_server, openai, openrouter, smollm2, vllm_serve"),
        ("model.serve.model_path=~/m.gguf", "write $HOME/... or quote it"),
    ],
)  # fmt: skip
def test_config_errors_exit_2_with_one_line(override, line, tmp_path):
    run_dir = tmp_path / "run"
    res = run_cli(override, f"hydra.run.dir={run_dir}")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "HYDRA_FULL_ERROR" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("error: ") and line in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not run_dir.exists(), "a refused config must not create the run dir"


def test_full_error_still_exits_2(tmp_path):
    res = run_cli("num_worker=8", env={"HYDRA_FULL_ERROR": "1"})
    assert res.returncode == 2 and "Traceback" in res.stderr and "did you mean num_workers?" in res.stderr


def _complete(line: str) -> str:
    """Install Hydra's bash completion as a user does, then ask it to complete `line` (bash's own vars)."""
    shell = (
        f'eval "$({PY} run.py -sc install=bash)"\n'
        f'COMP_LINE="{line}"; COMP_WORDS=($COMP_LINE); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); '
        "COMP_POINT=${#COMP_LINE}\n"
        'hydra_bash_completion; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{Path(PY).parent}:{os.environ['PATH']}"}
    res = subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0 and "NameError" not in res.stderr, res.stderr
    return res.stdout


@pytest.mark.parametrize("python", [".venv/bin/python", "python"])
def test_bash_completion_of_run_py(python):
    if python.startswith(".venv") and not (ROOT / ".venv").exists():
        pytest.skip("no .venv in this checkout")
    assert set(_complete(f"{python} run.py model=").split()) == {
        f"model={m}" for m in ("gguf", "llama_server", "local_server", "openai", "openrouter", "smollm2", "vllm_serve")
    }  # and no model=model_schema
    assert "sandbox=docker" in _complete(f"{python} run.py model=openai sandbox=").split()


def test_completion_query_for_the_console_script():
    """The query Hydra's script sends for `hermes-runner ...` (the app name, not python run.py)."""
    env = {**os.environ, "COMP_LINE": "hermes-runner distribution=re", "COMP_POINT": "29"}
    res = subprocess.run([PY, "run.py", "-sc", "query=bash"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert res.returncode == 0 and set(res.stdout.split()) == {"distribution=reasoning", "distribution=research"}


@pytest.mark.slow
def test_wheel_install_runs_from_any_directory(tmp_path):
    """A real (non-editable) install of the built wheel has the configs: `hermes-runner --help`, `--cfg job`
    and list_distributions work from another directory. Dependencies come from this venv (a .pth). Building
    it prints no warning of ours (pyproject.toml's metadata as setuptools wants it)."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns(".venv*", "outputs", "multirun", "build", "*.egg-info", "__pycache__", ".git")
    shutil.copytree(ROOT, src, ignore=ignore)
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [PY, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    # (without -q pip shows the build backend's warnings, e.g. setuptools' deprecation of a `license` table)
    assert "Deprecat" not in built.stdout + built.stderr and "Warning" not in built.stdout + built.stderr, built.stderr
    (wheel,) = wheels.glob("hermes_runner-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    deps = subprocess.run([PY, "-c", "import omegaconf, os; print(os.path.dirname(os.path.dirname(omegaconf.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (site / "deps.pth").write_text(deps + "\n")
    inst = subprocess.run(
        [PY, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inst.returncode == 0, inst.stderr[-2000:]
    exe = env_dir / "bin" / "hermes-runner"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(exe), *args], cwd=elsewhere, capture_output=True, text=True, env=env, timeout=120)

    where = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import hermes_runner; print(hermes_runner.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, env=env)  # fmt: skip
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr  # the wheel's copy, not this checkout
    page = run("--help")
    assert page.returncode == 0 and "== Config groups" in page.stdout and "smollm2*" in page.stdout, page.stderr
    job = run("--cfg", "job", "model=openrouter", "distribution=research")
    assert job.returncode == 0 and "openrouter.ai" in job.stdout, job.stderr
    listed = run("list_distributions=true")
    assert listed.returncode == 0 and "research" in listed.stdout, listed.stderr
    bad = run("num_worker=8")
    assert bad.returncode == 2 and "did you mean num_workers?" in bad.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_refused_connection_is_reported_as_refused(host, server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    url = f"http://{host}:{_closed_port()}/v1"
    res = run_cli(*base_overrides(server, tmp_path), f"model.base_url={url}", f"dataset_file={ds}",
                  "dry_run=true", f"hydra.run.dir={tmp_path / 'r'}")  # fmt: skip
    assert res.returncode == 2
    assert "connection refused" in res.stderr and "timed out" not in res.stderr, res.stderr[-2000:]


def test_sigusr1_prints_where_the_run_waits_and_the_run_goes_on(server, tmp_path):
    """`kill -USR1 <pid>` mid-run: every thread's stack and the tasks grouped by their awaits, on stderr;
    the run then finishes as if nothing happened."""
    import signal

    from tests.helpers.run import LiveRunner

    server.hold()  # every model call waits until released: both workers' calls are in flight at the signal
    rows = [{"prompt": f"p{i}"} for i in range(4)]
    run_dir = tmp_path / "run"
    args = base_overrides(server, tmp_path) + [
        "run_name=usr1", f"hydra.run.dir={run_dir}", f"dataset_file={write_jsonl(tmp_path / 'd.jsonl', rows)}",
        "num_workers=2", "distribution=terminal_only",
    ]  # fmt: skip
    both_waiting = re.compile(r"^2 task\(s\) waiting at:\n(  .*\n)*  .*loop\.py:\d+ in _complete$", re.M)

    def tasks() -> str:
        return runner.output.partition("asyncio tasks: ")[2]

    with LiveRunner([PY, str(ROOT / "run.py"), *args], {**os.environ, "HYDRA_FULL_ERROR": "0"}) as runner:
        runner.wait_for(lambda: server.held >= 2, 60, "two model calls in flight")
        runner.proc.send_signal(signal.SIGUSR1)
        runner.wait_for(lambda: both_waiting.search(tasks()), 10, "the task report")
        dump, groups = runner.output, tasks()
        server.release()
        assert runner.proc.wait(timeout=60) == 0, runner.output
    assert "Thread 0x" in dump and "(most recent call first)" in dump  # faulthandler: all threads
    assert both_waiting.search(groups), groups
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 4
