"""The layout's import rule at run time: the report and the trajectory format load no agent, tools, model,
executors or run code, and no OpenAI client."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.run import ROOT

CHECK = """
import importlib, pkgutil, sys
pkg = importlib.import_module(sys.argv[1])
for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
code = ("hermes_runner.agent", "hermes_runner.tools", "hermes_runner.model", "hermes_runner.executors")
loaded = sorted(
    n for n in sys.modules
    if n.split(".")[0] == "openai" or n.startswith(code) or n.split(".")[:2] == ["hermes_runner", "run"]
)
print(" ".join(loaded))
"""


@pytest.mark.parametrize("package", ["hermes_runner.report", "hermes_runner.trajectory"])
def test_package_loads_neither_openai_nor_the_agent(package: str) -> None:
    # Every module of the package, in a fresh interpreter: what it loads is what `python -m ...` pays for.
    out = subprocess.run(
        [sys.executable, "-c", CHECK, package], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == [], f"{package} loads {out.stdout.strip()}"
