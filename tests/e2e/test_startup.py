"""Start-up (issue 23 point 5): a listing or the help page loads none of the heavy libraries a run needs, and
the shortcuts behind that change nothing a user sees (the same listing, help pages and run modes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.run import ROOT, base_overrides, run_cli

# What a run may need and a listing never does: the model SDK and its HTTP stack, the sandbox and executor
# backends, the dataset formats, the report's templates, the retry library.
HEAVY = ("openai", "aiohttp", "httpx2", "docker", "ray", "datasets", "pyarrow", "jinja2", "tenacity", "submitit")

_LOADED = f"""
import json, runpy, sys
sys.argv = ["run.py", *sys.argv[1:]]
try:
    runpy.run_path("run.py", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
print("\\nLOADED " + json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})))
"""


def loaded(*args: str, cwd=ROOT) -> tuple[str, list[str]]:
    """(the output, the heavy modules in sys.modules afterwards) of `run.py args...` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _LOADED, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out, _, tail = proc.stdout.rpartition("\nLOADED ")
    return out, json.loads(tail)


@pytest.mark.parametrize("args", [["list_distributions=true"], ["--help"], ["--cfg", "job"]])
def test_a_listing_loads_no_heavy_library(args):
    out, heavy = loaded(*args)
    assert out.strip()
    assert heavy == [], heavy


def test_the_listing_shortcut_prints_what_the_composed_job_prints(tmp_path):
    fast = run_cli("list_distributions=true", cwd=tmp_path)
    composed = run_cli("list_distributions=true", "run_name=listing", f"hydra.run.dir={tmp_path / 'job'}")
    assert fast.returncode == composed.returncode == 0, (fast.stderr, composed.stderr)
    assert fast.stdout == composed.stdout
    assert "terminal_only: Terminal and file only" in fast.stdout
    assert not (tmp_path / "outputs").exists()  # (the shortcut writes no run dir)
    assert (tmp_path / "job" / ".hydra").is_dir()  # (the job did: the same listing reached through Hydra)


def test_hydra_mode_from_an_override_still_selects_a_sweep(tmp_path):
    res = run_cli("hydra.mode=MULTIRUN", "list_distributions=true", "run_name=m", f"hydra.sweep.dir={tmp_path}")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "multirun.yaml").exists() and (tmp_path / "jobs.jsonl").exists()


def test_hydras_own_help_still_lists_its_config_groups():
    res = run_cli("--hydra-help")
    assert res.returncode == 0, res.stderr
    assert "hydra/launcher: " in res.stdout and "basic" in res.stdout


def test_a_local_run_loads_only_the_backends_it_uses(server, tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"prompt": "hello"}) + "\n")
    args = base_overrides(server, tmp_path) + [
        f"dataset_file={dataset}",
        "run_name=t",
        f"hydra.run.dir={tmp_path / 'r'}",
    ]
    out, heavy = loaded(*args, "sandbox.local.isolation=none")
    assert "Trajectories:" in out
    roots = {m.split(".")[0] for m in heavy}
    assert "openai" in roots  # (the model client: a run needs it)
    assert roots.isdisjoint({"docker", "ray", "datasets", "pyarrow", "submitit"}), sorted(roots)
