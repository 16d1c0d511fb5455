"""Where each exported row came from: the hashes of what produced it, computed in one place for every format.

Every row of an export gets `provenance` (PROVENANCE_KEYS, each a string or null when the run dir cannot tell):

    system_prompt   hash of the system prompt the model saw (the run's and the row's own, without the tool list)
    prompt_template hash of `dataset.prompt_template` (null: the prompt column as it was)
    tools           hash of the tool schemas offered in that session (OpenAI form, as its system turn lists them)
    sampling        hash of the sampling parameters (SAMPLING_KEYS of the invocation that ran the prompt)
    model           the model that answered (as the endpoint named it)
    scorers         hash of the scorers' config, the version that scored and the sha256 of a python scorer's own
                    source file (null: no scorer); of a row scored again by `hermes-score`, that pass's scorers
    filters         hash of the run's `filters` (what kept or discarded the row)
    disposition     `kept`, or `discarded: <reason>`
    runner_version  hermes-runner's version in the invocation that recorded the row (null: older run dirs)

A hash is the sha256 of the text, or of the canonical JSON of a value (`digest`); `Provenance.table` maps every
hash it handed out to what it stands for, and an export's manifest holds that table once (trajectory/reproduce.py).
The facts come from the entry itself (its system turn lists the tools and the system prompt exactly as sent), its
ledger record, and the config of the invocation that recorded it (invocations.jsonl), else run.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hermes_runner.rundir.layout import HASHES, INVOCATIONS
from hermes_runner.rundir.reader import RunData, read_jsonl
from hermes_runner.trajectory.hermes import system_prompt_of, tools_of

PROVENANCE_KEYS = (
    "system_prompt",
    "prompt_template",
    "tools",
    "sampling",
    "model",
    "scorers",
    "filters",
    "disposition",
    "runner_version",
)
# The options of a model call that shape its sampling (dotted keys of the run's config).
SAMPLING_KEYS = (
    "model.temperature",
    "max_tokens",
    "model.default_max_tokens",
    "model.max_tokens_param",
    "reasoning",
    "model.reasoning_api",
    "model.tool_choice",
    "model.tool_choice_turns",
    "model.extra_body",
    "provider",
)


def canonical(value: Any) -> str:
    """The one text of a value: itself when it is a string, else its JSON with sorted keys and no spaces."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(value: Any) -> str:
    """The sha256 (hex) of `canonical(value)`: the same in every process and on every machine."""
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def _lookup(conf: dict | None, key: str) -> tuple[bool, Any]:
    """(found, value) of a dotted key in a nested config."""
    node: Any = conf
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


class Provenance:
    """The provenance of a run's entries; `table` collects every hash handed out -> the text or JSON it stands for.

    The hashes of an invocation's options and of a system turn are computed once (a run has few of each)."""

    def __init__(self, run: RunData):
        self.run = run
        self.table: dict[str, Any] = {}
        self._invocations: dict[Path, dict[int, dict]] = {}  # each dir's invocations.jsonl records
        self._hashes: dict[Path, dict[str, Any]] = {}  # each dir's hash table (rundir/layout HASHES)
        self._by_invocation: dict[tuple[Path, int], dict[str, str | None]] = {}
        self._by_system: dict[str | None, dict[str, str | None]] = {}

    def of(self, rec: dict, entry: dict) -> dict[str, str | None]:
        """The provenance of one entry, given its final ledger record."""
        system = next(
            (t.get("value") or "" for t in entry.get("conversations") or () if t.get("from") == "system"), None
        )
        if system not in self._by_system:
            tools = tools_of(system) if system is not None else None
            prompt = system_prompt_of(system, tools) if system is not None and tools is not None else None
            self._by_system[system] = {"system_prompt": self._hash(prompt), "tools": self._hash(tools)}
        options = self._options(rec)
        reason = rec.get("reason") or entry.get("discard_reason")
        model = rec.get("model") or (entry.get("metadata") or {}).get("model")
        return {
            "system_prompt": self._by_system[system]["system_prompt"],
            "prompt_template": options["prompt_template"],
            "tools": self._by_system[system]["tools"],
            "sampling": options["sampling"],
            "model": str(model) if model else None,
            "scorers": self._rescored(rec) or options["scorers"],
            "filters": options["filters"],
            "disposition": f"discarded: {reason}" if rec.get("status") == "discarded" else "kept",
            "runner_version": options["runner_version"],
        }

    def _options(self, rec: dict) -> dict[str, str | None]:
        """The hashes of the options of the invocation that recorded `rec` (computed once per invocation)."""
        key = (self._dir(rec), rec.get("inv", -1))
        if key not in self._by_invocation:
            inv = self._invocation(rec)
            conf = inv.get("config") if isinstance(inv.get("config"), dict) else None
            version = inv.get("version") if isinstance(inv.get("version"), str) else None
            code = inv.get("scorer_code") if isinstance(inv.get("scorer_code"), dict) else None
            scorers = self._option(conf, "scorers")
            by = ({"scorers": scorers, "version": version} | ({"code": code} if code else {})) if scorers else None
            self._by_invocation[key] = {
                "prompt_template": self._hash(self._option(conf, "dataset.prompt_template")),
                "sampling": self._hash(self._sampling(conf)),
                "scorers": self._hash(by),
                "filters": self._hash(self._option(conf, "filters")),
                "runner_version": version,
            }
        return self._by_invocation[key]

    def _hash(self, value: Any) -> str | None:
        if value is None:
            return None
        h = digest(value)
        self.table.setdefault(h, value)
        return h

    def _rescored(self, rec: dict) -> str | None:
        """The scorers hash of a row scored again by `hermes-score` (its value from the run's hash table)."""
        h = rec.get("scorers_hash")
        if not isinstance(h, str):
            return None
        d = self._dir(rec)
        if d not in self._hashes:
            self._hashes[d] = {
                r["hash"]: r.get("value") for r in read_jsonl(d / HASHES) if isinstance(r.get("hash"), str)
            }
        if h in self._hashes[d]:
            self.table.setdefault(h, self._hashes[d][h])
        return h

    def _dir(self, rec: dict) -> Path:
        """The run dir that recorded `rec` (a merged dir's shard)."""
        return self.run.ref_dirs.get(rec.get("key", ""), self.run.dir)

    def _option(self, conf: dict | None, key: str) -> Any:
        """A config option from the invocation's config, else from run.json's data config (older runs)."""
        found, value = _lookup(conf, key)
        if found:
            return value
        data = self.run.manifest.get("data_config") or {}
        if key in data:
            return data[key]
        return _lookup(data, key)[1]

    def _sampling(self, conf: dict | None) -> dict | None:
        values = {k: self._option(conf, k) for k in SAMPLING_KEYS}
        return values if any(v is not None for v in values.values()) or conf is not None else None

    def _invocation(self, rec: dict) -> dict:
        """The invocations.jsonl record of the invocation that recorded `rec` (in its own shard of a merged dir)."""
        d = self._dir(rec)
        if d not in self._invocations:
            self._invocations[d] = {r["invocation"]: r for r in read_jsonl(d / INVOCATIONS) if "invocation" in r}
        return self._invocations[d].get(rec.get("inv", -1), {})
