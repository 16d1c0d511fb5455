"""run/ is the composition root: the parts below it never see the whole RunConfig, only their own sections."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import hermes_runner
from hermes_runner.config.root import RunConfig
from hermes_runner.run import wiring

from tests.helpers.inprocess import run_cfg

PACKAGE = Path(hermes_runner.__file__).parent
BELOW_RUN = ("agent", "executors", "scorers", "tools", "trajectory", "model", "sandbox", "rundir", "dataset", "util")


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    return imported | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def test_no_part_below_run_names_the_root_config():
    offenders = [
        str(p.relative_to(PACKAGE))
        for room in BELOW_RUN
        for p in sorted((PACKAGE / room).rglob("*.py"))
        if "RunConfig" in names_used(p)
    ]
    assert offenders == []


def test_the_worker_spec_holds_sections_and_crosses_a_process_boundary(tmp_path):
    cfg = run_cfg(tmp_path, seed=7, num_workers=12)
    spec = wiring.worker_spec(cfg, tmp_path, [{"role": "user", "content": "hi"}], None, {"img": 2}, {"web": "no key"})
    values = [getattr(spec, f.name) for f in dataclasses.fields(spec)]
    assert not any(isinstance(v, RunConfig) for v in values)
    assert spec.model is cfg.model and spec.session.sandbox is cfg.sandbox and spec.session.seed == 7
    assert spec.tool_pool == 12 and spec.pool_size == 12 and spec.settings.prefill_messages[0]["content"] == "hi"
    assert pickle.loads(pickle.dumps(spec)).toolsets_dropped == {"web": "no key"}
