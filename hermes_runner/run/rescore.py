"""Score a finished run again, without calling the agent's model (docs/scoring.md).

    hermes-score outputs/my_run scorer=match                # one scorer, named `match`
    hermes-score outputs/my_run +scorer@scorers.answer=match
    hermes-score outputs/my_run +scorer@scorers.answer=match scorers.answer.match.mode=numeric --force
    hermes-score outputs/my_run +scorer@scorers.quality=judge scorers.quality.judge.endpoint.model=gpt-4o

Every kept and discarded entry gets the new scorers' records (a scorer of the same name is replaced); its
re-scored line goes to rescored.jsonl with a `rescored` ledger record, and trajectories.jsonl,
statistics.json and report.html are rebuilt. Prompts already scored by every given scorer are skipped (a
rerun after a kill goes on where it stopped), unless --force. `verify` is refused: it needs the prompt's own sandbox, which is
removed when the prompt ends (the agent's files are gone); run the prompts again in a new run to verify them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from hermes_runner import __version__
from hermes_runner.config import (
    ScorerConfig,
    ScorerKind,
    as_container,
    check,
    check_scorers,
    single_scorer_problem,
    with_single,
)
from hermes_runner.config.root import RunConfig, register_configs
from hermes_runner.dataset.mapping import Mapping
from hermes_runner.errors import ConfigError
from hermes_runner.run.budget import RunBudget
from hermes_runner.run.invocation import Run
from hermes_runner.run.record import ledger_scores
from hermes_runner.rundir import manifest
from hermes_runner.rundir.layout import INVOCATIONS
from hermes_runner.rundir.manifest import now
from hermes_runner.rundir.store import dumps_line
from hermes_runner.scorers import (
    NOT_SCORED,
    Job,
    Score,
    Scorers,
    code_versions,
    open_scorers,
    primary_name,
    reward_of,
    row_from_entry,
)
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.provenance import digest
from hermes_runner.usage import Usage
from hermes_runner.util import fastjson
from hermes_runner.util.redact import Redactor

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the package's config groups


def run_config(run_dir: Path) -> RunConfig:
    """The config of the run's last invocation (invocations.jsonl), as a validated RunConfig."""
    path = run_dir / INVOCATIONS
    if not path.exists():
        raise ConfigError(f"{run_dir} is not a run directory of this runner (no {INVOCATIONS})")
    last = None
    for line in path.read_text().splitlines():
        try:
            last = json.loads(line).get("config") or last
        except ValueError:
            continue
    if not last:
        raise ConfigError(f"{path} holds no invocation's config")
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RunConfig), last))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"the config recorded in {path} does not fit this version: {exc}") from None


def scorer_configs(overrides: list[str]) -> dict[str, ScorerConfig]:
    """The scorers that Hydra overrides (`scorer=KIND`, `+scorer@scorers.NAME=KIND`, `scorers.NAME.x=...`) compose."""
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            dcfg = compose(config_name="config", overrides=overrides)
        scorers = OmegaConf.to_object(dcfg.scorers)
        single = OmegaConf.to_object(dcfg.scorer) if dcfg.get("scorer") is not None else None
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"bad scorer overrides {' '.join(overrides)}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    if why := single_scorer_problem(scorers, single):
        raise ConfigError(why)
    if not (scorers := with_single(scorers, single)):
        raise ConfigError("no scorer given: add one, e.g. scorer=match (docs/scoring.md)")
    return scorers


def combined(own: dict[str, ScorerConfig], new: dict[str, ScorerConfig]) -> dict[str, ScorerConfig]:
    """The run's scorers with the new ones (a new one replaces its namesake); a new primary takes over."""
    if any(s.primary for s in new.values()):
        own = {n: dataclasses.replace(s, primary=False) for n, s in own.items()}
    out = {**own, **new}
    if problems := check_scorers(out):
        raise ConfigError("invalid scorers: " + "; ".join(problems))
    return out


class Rescoring:
    """One pass of new scorers over a run directory whose lock it holds (through `run`)."""

    def __init__(self, run: Run, new: dict[str, ScorerConfig], force: bool):
        self.run, self.new, self.force = run, new, force
        self.all = combined(run.cfg.scorers, new)
        self.primary = primary_name(self.all)
        self.records: dict[str, dict] = {}
        self.counts = {"scored": 0, "skipped": 0, "errors": 0}
        self.budget = RunBudget(run.cfg.limits, run.spend.total(run.stats.usage))
        self.mapping = Mapping(run.cfg.dataset)  # the run's dataset.fields: where target and verify are
        # The scorers of this pass, as the rows' provenance names them (trajectory/provenance.py): by hash in
        # each rescored record, the value once in the run's hash table.
        scorers = {"scorers": as_container(self.all), "version": __version__, "code": code_versions(self.all)}
        self.scorers_hash = digest(run.redact(scorers))
        manifest.record_hash(run.dir, self.scorers_hash, run.redact(scorers))

    def todo(self) -> list[str]:
        keys = sorted(self.run.state.terminal, key=lambda k: (self.run.state.terminal[k].index, k))
        self.run.store.load(on_record=self._keep, repair=False)
        return keys

    def _keep(self, rec: dict) -> None:
        if rec["status"] in ("ok", "discarded"):
            self.records[rec["key"]] = rec

    def entry(self, key: str, handles: dict[str, int]) -> dict:
        ref = self.run.state.terminal[key]
        row = fastjson.loads(self.run.store.read_entry(ref, handles))
        if ref.file in self.run.state.foreign:
            row = entries.conform(row, key=key, tool_names=self.run.fill, layout=self.run.cfg.output.layout)
        return row

    def done(self, entry: dict) -> bool:
        have = {s["name"] for s in entry.get("scores") or () if not s.get("error")}  # errors are tried again
        return not self.force and set(self.new) <= have

    def merged(self, prev: list[dict], fresh: list[Score]) -> tuple[list[dict], float]:
        """(records, reward): the entry's records with the fresh ones in place of their namesakes (new ones after),
        a "not scored" record for a configured scorer that never judged it, the primary's first.

        The primary is the one marked primary, else the entry's own primary (its first record), else the first."""
        prev = [r for r in prev if r.get("error") != NOT_SCORED]  # placeholders: a real record replaces them
        by_name = {r["name"]: entries.score_record(r) for r in prev}
        by_name.update((f.name, f.as_dict()) for f in fresh)
        for name, sc in self.all.items():
            by_name.setdefault(name, Score.failed(name, sc.kind, NOT_SCORED).as_dict())
        marked = next((n for n, sc in self.all.items() if sc.primary), None)
        primary = marked or (prev[0]["name"] if prev else self.primary)
        records = sorted(by_name.values(), key=lambda r: r["name"] != primary)
        return records, reward_of(records, primary)

    async def one(self, key: str, entry: dict, scorers: Scorers) -> None:
        usage = Usage()
        fresh = await scorers.score(Job(entry, row_from_entry(entry, self.mapping), None, usage))
        self.counts["errors"] += sum(1 for s in fresh if s.error)
        prev = list(entry.get("scores") or [])
        entry["scores"], entry["reward"] = self.merged(prev, fresh)
        records = entry["scores"]
        line = dumps_line(entry)
        old = self.records.get(key, {})
        rec = {
            "key": key,
            "index": old.get("index", entry.get("prompt_index", -1)),
            "batch": old.get("batch", -1),
            "inv": self.run.invocation,
            "ts": now(),
            "reward": entry["reward"],
            "scores": ledger_scores(records),
            "prev_scores": ledger_scores([entries.score_record(s) for s in prev]),
            "row": old.get("row", key.split("~s", 1)[0]),
            "model": old.get("model", (entry.get("metadata") or {}).get("model", "")),
            "toolsets": old.get("toolsets", []),
            **({"at_limit": old["at_limit"]} if "at_limit" in old else {}),  # new scores count as the old did
            "usage": usage.as_dict(),  # the judge's spend
            "api_calls": 0,
            "scorers_hash": self.scorers_hash,
        }
        ref = self.run.state.terminal[key]
        self.run.store.write_rescored(line, rec)
        ref.file, ref.offset, ref.length = rec["file"], rec["offset"], rec["length"]
        self.counts["scored"] += 1  # (the budget metered the judge's calls themselves: its hook)

    async def __call__(self, concurrency: int) -> dict:
        cfg = self.run.cfg
        scorers = open_scorers(self.new, cfg.model, hooks=[self.budget.tools])
        handles: dict[str, int] = {}
        gate = asyncio.Semaphore(concurrency)

        async def go(key: str) -> None:
            async with gate:
                if self.budget.check():
                    return
                entry = self.entry(key, handles)
                if self.done(entry):
                    self.counts["skipped"] += 1
                    return
                await self.one(key, entry, scorers)

        try:
            await asyncio.gather(*(go(k) for k in self.todo()))
        finally:
            await scorers.aclose()
            for fd in handles.values():
                os.close(fd)
        return {**self.counts, "stopped_by_budget": self.budget.reason}


def rescore(run_dir: Path | str, overrides: list[str], force: bool = False, concurrency: int = 8) -> dict:
    """Apply the scorers `overrides` compose to a finished run; return what was done and the new statistics."""
    run_dir = Path(run_dir)
    new = scorer_configs(overrides)
    if verify := [n for n, s in new.items() if s.kind == ScorerKind.verify]:
        raise ConfigError(
            f"scorer {', '.join(verify)}: verify runs in the prompt's own sandbox, which was removed when the prompt "
            "ended (the agent's files are gone): add it to the run's scorers and run the prompts again"
        )
    cfg = run_config(run_dir)
    cfg = dataclasses.replace(cfg, resume=True, force_resume=True, dry_run=False, progress=False)
    check(cfg)
    run = Run(cfg, run_dir, Redactor.from_sources(overrides, as_container(cfg)))  # (secrets the overrides name)
    run.prepare()
    try:
        done = asyncio.run(Rescoring(run, new, force)(concurrency))
        run.store.close()
    finally:
        run.store.unlock()
    after = Run(cfg, run_dir)  # statistics and trajectories.jsonl from the ledger, new scores included
    plan = after.prepare()
    try:
        stats = after.finalize(plan)
    finally:
        after.store.unlock()
    return {**done, "statistics": stats}
