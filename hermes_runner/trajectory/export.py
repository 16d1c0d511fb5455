"""Export a run's trajectories as training datasets.

    python -m hermes_runner.export outputs/my_run --to parquet   # trajectories.parquet (kept)
    python -m hermes_runner.export outputs/my_run --to hf        # datasets.load_from_disk() dataset (kept)
    python -m hermes_runner.export outputs/my_run --to openai    # OpenAI's fine-tuning format (kept): its API's files
    python -m hermes_runner.export outputs/my_run --to chat      # messages for chat templates (kept): TRL, axolotl
    python -m hermes_runner.export outputs/my_run --to splits    # kept and discarded splits (DatasetDict)
    python -m hermes_runner.export outputs/my_run --to atif      # one ATIF trajectory <key>.json each + index.jsonl
    ... --to atif --discarded                                     # the discarded trajectories too (marked as such)
    python -m hermes_runner.export outputs/my_run --to inspect   # one Inspect AI eval log: inspect view
    python -m hermes_runner.export outputs/my_run --to tokens    # token ids + loss masks JSONL (output.tokens)
    python -m hermes_runner.export outputs/my_run --to splits --pass-fail   # kept rows split into pass / fail
    ... --min-reward 1.0 [--best-of-k]                           # only kept rows with reward >= 1.0 (best sample per row)
    ... --only-completed                                          # only trajectories that ended with an answer
    ... --to chat --reasoning inline                              # reasoning as a <think> block (Qwen2.5 trains it)
    ... --to openai --metadata                                    # also each line's id and metadata (not OpenAI's)
    ... --push-to-hub user/name [--private]                       # also upload (needs a Hugging Face token)
    ... --manifest                                                # + export_manifest.json: hashes, versions, sha256s
    python -m hermes_runner.export --reproduce DIR/export_manifest.json   # the same files, byte for byte
    python -m hermes_runner.export outputs/my_sweep --to all     # every format of every job, each with a manifest

Rows are read through the ledger, so a run that is still going exports the prompts finished so far; a dir
made by `python -m hermes_runner.merge` exports the same way. An empty split is an empty file of the same
features, not an error.
The chat and openai exports write their HF features beside them (dataset_features.json); docs/training.md has
the recipes.
The atif export (Harbor's Agent Trajectory Interchange Format, trajectory/atif.py) writes one trajectory file per
kept prompt sample and index.jsonl: a line per file and per failed prompt (which has no trajectory: its error).
The inspect export is the whole run (every sample, discarded and failed ones too) as `<run_name>.eval` for
`inspect view --log-dir <run_dir>/export/inspect` and `inspect_ai.log.read_eval_log` (docs/evaluation.md).
Every row carries its `provenance` (trajectory/provenance.py); docs/formats.md lists what each consumer reads.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_runner import __version__
from hermes_runner.config import OutputLayout
from hermes_runner.errors import ExportError
from hermes_runner.rundir.layout import FEATURES_FILE
from hermes_runner.rundir.reader import RunData, find_runs
from hermes_runner.rundir.store import atomic_write, dumps_line
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.atif import to_atif
from hermes_runner.trajectory.entry import _list, _value, best_of_k, score_record
from hermes_runner.trajectory.hermes import call_dict, clean_calls, parsed_args
from hermes_runner.trajectory.inspect_log import write_eval
from hermes_runner.trajectory.openai import to_openai
from hermes_runner.trajectory.provenance import PROVENANCE_KEYS, Provenance
from hermes_runner.trajectory.tokens import DriftPolicy, token_rows

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

FORMATS = ("parquet", "hf", "openai", "chat", "splits", "atif", "inspect", "tokens")
SPLITS = ("kept", "discarded")
ARGUMENTS = ("object", "string")  # chat export: tool-call arguments as JSON objects or as JSON text
REASONING = ("field", "inline", "drop")  # chat/openai export: reasoning as `reasoning_content`, <think> text, or none
USAGE_KEYS = {
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "cached_tokens": "int64",
    "reasoning_tokens": "int64",
    "total_tokens": "int64",
    "cost_usd": "float64",
}
COLUMNS = (  # the columns of an entry, in the export's order
    "prompt_index",
    "conversations",
    "metadata",
    "completed",
    "partial",
    "stop_reason",
    "api_calls",
    "toolsets_used",
    "tool_stats",
    "tool_error_counts",
    "usage",
    "discard_reason",
    "reward",
    "scores",
)
PROVENANCE = "provenance"  # every row's provenance (trajectory/provenance.py): a struct column, an openai key
KNOWN = frozenset(COLUMNS) | {PROVENANCE}


def read_splits(
    run: RunData,
    splits: Iterable[str] = SPLITS,
    only_completed: bool = False,
    provenance: Provenance | None = None,
) -> dict[str, list[dict]]:
    """Trajectory entries of the run, by disposition, in prompt order (`only_completed`: those that ended
    with a final answer), each with its `provenance` (collected in `provenance`'s table when given)."""
    status = {"kept": "ok", "discarded": "discarded"}
    prov = provenance or Provenance(run)
    out: dict[str, list[dict]] = {}
    for split in splits:
        keys = [
            k
            for k, r in run.final.items()
            if r["status"] == status[split] and (r.get("completed") or not only_completed)
        ]
        out[split] = [
            {**entry, PROVENANCE: prov.of(rec, entry)}
            for rec, entry in run.entries(keys)
            if entry.get("completed") or not only_completed
        ]
    return out


def passed(entry: dict, min_reward: float | None = None) -> bool:
    """Whether a trajectory passed: its reward >= min_reward when given, else its primary score (the first record)
    passed without error."""
    if min_reward is not None:
        return float(entry.get("reward") or 0.0) >= min_reward
    scores = entry.get("scores") or []
    return bool(scores) and bool(scores[0].get("passed")) and not scores[0].get("error")


def select(
    splits: dict[str, list[dict]], min_reward: float | None, best: bool, pass_fail: bool
) -> dict[str, list[dict]]:
    """The kept rows filtered by reward, the best sample of each row, or split into pass / fail."""
    kept = splits["kept"]
    if best:
        keys = best_of_k((str(i), e) for i, e in enumerate(kept))
        kept = [e for i, e in enumerate(kept) if str(i) in keys]
    if pass_fail:  # of the kept rows only: discarded ones were never candidates
        return {
            "pass": [e for e in kept if passed(e, min_reward)],
            "fail": [e for e in kept if not passed(e, min_reward)],
        }
    if min_reward is not None:
        kept = [e for e in kept if passed(e, min_reward)]
    return {**splits, "kept": kept}


# -- one schema for every row -------------------------------------------------------------


def _scalar_type(values: list[Any]) -> str:
    """The Arrow type of an extra field: its own type when every value has it, else string."""
    present = [v for v in values if v is not None]
    for kind, name in ((bool, "bool"), (int, "int64"), (float, "float64"), (str, "string")):
        if present and all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in present):
            return name
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float64"
    return "string"


_BASE_TYPES = {"int64": "int64", "float64": "float64", "bool": "bool"}  # others (string, timestamp): as text


def _cast(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "string" and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if kind == "float64":
        return float(value)
    return value


class Schema:
    """The columns of a set of entries: known fields typed explicitly, extra fields unified.

    `base`: the run's own features (dataset_features.json), so that an export with few or no rows still has
    every column the run's entries have."""

    def __init__(self, rows: list[dict], base: dict | None = None):
        base = base or {}
        turn = ((base.get("conversations") or {}).get("feature")) or {}
        # structured layout (or rows of older versions): turns carry `tool_calls`; hermes: {from, value} only
        self.calls = "tool_calls" in turn or any("tool_calls" in t for r in rows for t in r.get("conversations") or [])
        self.tools = sorted({*(base.get("tool_stats") or {}), *(n for r in rows for n in (r.get("tool_stats") or {}))})
        seeded = {k: _BASE_TYPES.get(v.get("dtype"), "string") for k, v in (base.get("metadata") or {}).items()}
        self.meta = {
            k: _scalar_type([(r.get("metadata") or {}).get(k) for r in rows]) if k not in seeded or rows else seeded[k]
            for k in sorted({*seeded, *(k for r in rows for k in (r.get("metadata") or {}))})
        }
        self.extra = {k: _scalar_type([r.get(k) for r in rows]) for k in sorted({k for r in rows for k in r} - KNOWN)}
        self.provenance = not rows or any(PROVENANCE in r for r in rows)

    def features(self) -> datasets.Features:
        """The run's entry features (trajectory.entry.features) with these rows' metadata and extra fields."""
        from datasets import Features

        own = entries.features(self.tools, OutputLayout.structured if self.calls else OutputLayout.hermes)
        if self.calls:  # arguments as JSON text here: one Arrow type for every tool's arguments
            own["conversations"]["feature"]["tool_calls"]["feature"]["function"]["arguments"] = _value("string")
        own["metadata"] = {k: _value(t) for k, t in self.meta.items()}
        spec = {k: own[k] for k in COLUMNS} | {k: _value(t) for k, t in self.extra.items()}
        if self.provenance:
            spec[PROVENANCE] = {k: _value("string") for k in PROVENANCE_KEYS}
        if not self.tools:  # Arrow has no empty struct
            spec.pop("tool_stats")
            spec.pop("tool_error_counts")
        if not self.meta:
            spec.pop("metadata")
        return Features.from_dict(spec)

    def row(self, e: dict) -> dict:
        """An entry with every column present and typed the same way."""
        stats = e.get("tool_stats") or {}
        zero = {"count": 0, "success": 0, "failure": 0}
        meta = e.get("metadata") or {}
        usage = e.get("usage") or {}
        out = {
            "prompt_index": int(e.get("prompt_index", -1)),
            "conversations": [self.turn(t) for t in e.get("conversations") or []],
            "metadata": {k: _cast(meta.get(k), t) for k, t in self.meta.items()},
            "completed": bool(e.get("completed")),
            "partial": bool(e.get("partial")),
            "stop_reason": str(e.get("stop_reason") or ""),
            "api_calls": int(e.get("api_calls") or 0),
            "toolsets_used": [str(t) for t in e.get("toolsets_used") or []],
            "tool_stats": {
                n: {**zero, **{k: int(v) for k, v in (stats.get(n) or {}).items() if k in zero}} for n in self.tools
            },
            "tool_error_counts": {n: int((e.get("tool_error_counts") or {}).get(n, 0)) for n in self.tools},
            "usage": {k: (float if t == "float64" else int)(usage.get(k) or 0) for k, t in USAGE_KEYS.items()},
            "discard_reason": str(e.get("discard_reason") or ""),
            "reward": float(e.get("reward") or 0.0),
            "scores": [score_record(s) for s in e.get("scores") or [] if isinstance(s, dict)],
            **{k: _cast(e.get(k), t) for k, t in self.extra.items()},
        }
        if self.provenance:
            prov = e.get(PROVENANCE) or {}
            out[PROVENANCE] = {k: None if prov.get(k) is None else str(prov[k]) for k in PROVENANCE_KEYS}
        if not self.tools:
            del out["tool_stats"], out["tool_error_counts"]
        if not self.meta:
            del out["metadata"]
        return out

    def turn(self, t: dict) -> dict:
        out = {"from": str(t.get("from", "")), "value": str(t.get("value") or "")}
        if self.calls:  # arguments as JSON text here: one Arrow type for every tool's arguments
            out["tool_calls"] = clean_calls(t.get("tool_calls") or [])
        return out


def to_datasets(splits: dict[str, list[dict]], base: dict | None = None) -> dict[str, datasets.Dataset]:
    """One `datasets.Dataset` per split, all with the same features (an empty split has them too)."""
    try:
        from datasets import Dataset
    except ImportError:
        raise ExportError("this export needs the `datasets` library: pip install 'hermes-runner[export]'") from None
    schema = Schema([e for rows in splits.values() for e in rows], base)
    features = schema.features()

    def dataset(rows: list[dict]) -> Dataset:
        if not rows:  # (from_list([]) has no columns at all)
            return Dataset.from_dict({k: [] for k in features}, features=features)
        return Dataset.from_list([schema.row(e) for e in rows], features=features)

    return {name: dataset(rows) for name, rows in splits.items()}


# -- OpenAI messages -----------------------------------------------------------------------


def openai_message(m: dict, arguments: str = "object", tool_name: bool = True) -> dict:
    """One message with only the keys it has a value for: `tool_calls` only on an assistant message that calls
    (Hermes 3 style templates test whether the key is there), `content` left out only beside calls,
    `reasoning_content` when the reasoning is kept as a field, `tool_call_id` (and with `tool_name`, `name`) on
    tool results. The calls' `arguments` are JSON objects, as chat templates render them (a string would be
    encoded twice), or with `arguments="string"` the JSON text OpenAI's API and fine-tuning files carry."""
    out: dict = {"role": m["role"]}
    calls = [
        call_dict(c["id"], c["function"]["name"], parsed_args(c["function"]["arguments"]))
        for c in m.get("tool_calls") or []
    ]
    if arguments == "string":
        calls = clean_calls(calls)
    if m.get("content") or not calls:
        out["content"] = m.get("content") or ""
    if m.get("reasoning_content"):
        out["reasoning_content"] = m["reasoning_content"]
    if calls:
        out["tool_calls"] = calls
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id") or ""
        if tool_name and m.get("name"):
            out["name"] = m["name"]
    return out


def openai_metadata(entry: dict) -> dict:
    """The bookkeeping fields of an exported line: `id` (the prompt's key) and `metadata`."""
    meta = entry.get("metadata") or {}
    return {
        "id": str(meta.get("prompt_key") or entry.get("prompt_index")),
        "metadata": {
            "prompt_index": int(entry.get("prompt_index", -1)),
            "model": str(meta.get("model") or ""),
            "completed": bool(entry.get("completed")),
            "partial": bool(entry.get("partial")),
            "stop_reason": str(entry.get("stop_reason") or ""),
            "discard_reason": str(entry.get("discard_reason") or ""),
            "reward": float(entry.get("reward") or 0.0),
        },
        # an extra key: fine-tuning readers keep the columns they know (a writer that must not have it drops it)
        PROVENANCE: {k: (entry.get(PROVENANCE) or {}).get(k) for k in PROVENANCE_KEYS},
    }


def chat_row(entry: dict, reasoning: str, arguments: str = "object") -> dict:
    """One line of the chat export: messages, tools (as JSON text: TRL and axolotl parse it), id, metadata."""
    conv = to_openai(entry, reasoning=reasoning)
    return {
        "messages": [openai_message(m, arguments) for m in conv["messages"]],
        "tools": json.dumps(conv["tools"], ensure_ascii=False),
        **openai_metadata(entry),
    }


def fine_tuning_row(entry: dict, reasoning: str, metadata: bool = False) -> dict:
    """One line of OpenAI's fine-tuning format: `messages` (arguments as JSON text, no empty keys) and `tools`
    (an array of function specs, left out when the row had none); `id` and `metadata` only when asked."""
    conv = to_openai(entry, reasoning=reasoning)
    row: dict = {"messages": [openai_message(m, "string", tool_name=False) for m in conv["messages"]]}
    if conv["tools"]:
        row["tools"] = conv["tools"]
    return row | (openai_metadata(entry) if metadata else {})


def openai_features(fmt: str = "chat", metadata: bool = True) -> dict:
    """`datasets.Features.to_dict()` of the chat or openai export (datasets >= 5): each message is `Json`, so it
    loads with its own keys only (no key filled with null) and object `arguments` stay objects."""
    v = _value
    meta = {
        "id": v("string"),
        "metadata": {
            "prompt_index": v("int64"),
            "model": v("string"),
            "completed": v("bool"),
            "partial": v("bool"),
            "stop_reason": v("string"),
            "discard_reason": v("string"),
            "reward": v("float64"),
        },
        PROVENANCE: {k: v("string") for k in PROVENANCE_KEYS},
    }
    tools = _list({"_type": "Json"}) if fmt == "openai" else v("string")
    return {"messages": _list({"_type": "Json"}), "tools": tools, **(meta if metadata else {})}


def write_openai(
    entries: list[dict], path: Path, reasoning: str, arguments: str = "object", fmt: str = "chat", metadata: bool = True
) -> int:
    """Write the chat export (`fmt="chat"`) or OpenAI's fine-tuning format (`fmt="openai"`) and its features."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "openai":
        rows = [fine_tuning_row(e, reasoning, metadata) for e in entries]
    else:
        rows = [chat_row(e, reasoning, arguments) for e in entries]
    # datasets infers types per 10 MB chunk: a first chunk without any tool call would type `tool_calls`
    # as null and fail on the later ones, so the first row with calls (if any) leads the file.
    first = next((i for i, r in enumerate(rows) if any(m.get("tool_calls") for m in r["messages"])), None)
    if first:
        rows.insert(0, rows.pop(first))
    atomic_write(path, (dumps_line(r) for r in rows))
    features = openai_features(fmt, metadata=fmt == "chat" or metadata)
    atomic_write(path.parent / FEATURES_FILE, (json.dumps(features, indent=2) + "\n").encode())
    return len(entries)


# -- ATIF trajectories -------------------------------------------------------------------


ATIF_INDEX = "index.jsonl"
_UNSAFE = re.compile(r"[^A-Za-z0-9._~-]")


def write_atif(run: RunData, splits: dict[str, list[dict]], target: Path) -> None:
    """One ATIF trajectory file per entry of `splits` (kept, and discarded when asked) and the index: a line per
    file, then one per failed prompt (no trajectory: its error)."""
    target.mkdir(parents=True, exist_ok=True)
    timelines = run.timelines()
    lines, names = [], set()
    for disposition, rows in splits.items():
        for e in rows:
            meta = e.get("metadata") or {}
            key = str(meta.get("prompt_key") or e.get("prompt_index"))
            name = _UNSAFE.sub("_", key)
            while name in names:  # (two keys made alike by the sanitizing)
                name += "_"
            names.add(name)
            traj = to_atif(e, session_id=f"{run.name}/{key}", version=__version__, timeline=timelines.get(key),
                           disposition=disposition)  # fmt: skip
            atomic_write(target / f"{name}.json", (json.dumps(traj, ensure_ascii=False, indent=1) + "\n").encode())
            lines.append(
                {"key": key, "file": f"{name}.json", "status": "ok" if disposition == "kept" else disposition,
                 "prompt_index": e.get("prompt_index"), "row_key": entries.row_key(e),
                 "sample_index": entries.sample_index(e),
                 "stop_reason": e.get("stop_reason"), "reward": e.get("reward"), "steps": len(traj["steps"])}
            )  # fmt: skip
    failures = run.failures()
    for key, rec in run.final.items():
        if rec["status"] == "failed":
            detail = failures.get(key) or rec
            lines.append(
                {"key": key, "file": None, "status": "failed", "prompt_index": rec.get("index"),
                 "sample_index": rec.get("sample", 0), "error_type": detail.get("error_type", ""),
                 "error": detail.get("error", "")}
            )  # fmt: skip
    atomic_write(target / ATIF_INDEX, (dumps_line(line) for line in lines))


def write_token_rows(run: RunData, kept: list[dict], path: Path, drift: str) -> tuple[Path, dict]:
    """The kept rows' token ids with loss masks (trajectory/tokens.py); a run without token ids is refused."""
    try:
        policy = DriftPolicy(drift)
    except ValueError:
        raise ExportError(f"unknown drift policy {drift!r}; choose one of mask, drop") from None
    sidecar = run.tokens()
    if not sidecar:
        raise ExportError(f"{run.dir} holds no token ids: run it with output.tokens=true (docs/training.md)")
    rows, counts = token_rows(kept, sidecar, policy)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (dumps_line(r) for r in rows))
    return path, counts


def openai_options(fmt: str, reasoning: str | None, arguments: str | None) -> tuple[str, str]:
    """The reasoning and arguments forms of the chat or openai export, defaults per format: OpenAI's fine-tuning
    format has no reasoning field (dropped unless asked) and carries arguments as JSON text only."""
    if reasoning is not None and reasoning not in REASONING:
        raise ExportError(f"unknown reasoning form {reasoning!r}; choose one of {', '.join(REASONING)}")
    if arguments is not None and arguments not in ARGUMENTS:
        raise ExportError(f"unknown arguments form {arguments!r}; choose one of {', '.join(ARGUMENTS)}")
    if fmt == "openai":
        if arguments == "object":
            raise ExportError(
                "--to openai writes OpenAI's fine-tuning format, whose tool-call arguments are JSON text: "
                "for arguments as objects (chat templates) use --to chat"
            )
        return reasoning or "drop", "string"
    return reasoning or "field", arguments or "object"


# -- the command -------------------------------------------------------------------------------


def export(
    run_dir: Path | str,
    fmt: str,
    out: Path | str | None = None,
    reasoning: str | None = None,
    min_reward: float | None = None,
    best: bool = False,
    pass_fail: bool = False,
    only_completed: bool = False,
    arguments: str | None = None,
    metadata: bool = False,
    discarded: bool = False,
    table: dict | None = None,
    drift: str = "mask",
) -> tuple[Path, dict]:
    """Write the export into `out`; return (where, rows per split). `table`: filled with the rows' provenance
    hashes -> what each stands for (trajectory/provenance.py). It writes in place, over what is there: to replace
    an earlier export (its stale files removed), go through `reproduce.export_one`, as the commands do."""
    if discarded and fmt != "atif":
        raise ExportError("--discarded adds the discarded trajectories to an atif export: use it with --to atif")
    if pass_fail and fmt != "splits":
        raise ExportError("--pass-fail makes splits: use it with --to splits")
    if fmt == "inspect" and (min_reward is not None or best or only_completed):
        raise ExportError(
            "--to inspect writes every sample of the run: --min-reward, --best-of-k and --only-completed do not apply"
        )
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    reasoning, arguments = openai_options(fmt, reasoning, arguments)
    runs = find_runs(run_dir)
    if runs != [Path(run_dir)]:
        raise ExportError(
            f"{run_dir} is a sweep of {len(runs)} jobs; export one job directory at a time, e.g. {runs[0]}"
        )
    run = RunData.load(run_dir)
    if run.live:
        log.warning(
            "%s is still running or did not finish: exporting the %d prompts finished so far", run_dir, len(run.final)
        )
    target = Path(out) if out else Path(run_dir) / "export" / fmt
    prov = Provenance(run)
    splits = read_splits(run, SPLITS if fmt == "splits" or discarded else ("kept",), only_completed, prov)
    if table is not None:
        table.update(prov.table)
    splits = select(splits, min_reward, best, pass_fail)
    counts = {k: len(v) for k, v in splits.items()}
    if fmt in ("openai", "chat"):
        path = target / f"trajectories.{fmt}.jsonl"
        write_openai(splits["kept"], path, reasoning, arguments, fmt, metadata)
        return path, counts
    if fmt == "atif":
        write_atif(run, splits, target)
        return target, counts
    if fmt == "inspect":  # the whole run: every sample, discarded and failed ones too (trajectory/inspect_log.py)
        path = target / f"{run.name}.eval"
        n = write_eval(run, path, prov.of)
        if table is not None:  # (the discarded samples' hashes too)
            table.update(prov.table)
        return path, {"samples": n}
    if fmt == "tokens":
        return write_token_rows(run, splits["kept"], target / "trajectories.tokens.jsonl", drift)
    sets = to_datasets(splits, run.features())
    if fmt == "parquet":
        target.mkdir(parents=True, exist_ok=True)
        path = target / "trajectories.parquet"
        sets["kept"].to_parquet(str(path))
        return path, counts
    from datasets import DatasetDict

    # (an empty split saved as 0 shards does not load back: every split gets at least one)
    if fmt == "splits":
        DatasetDict(sets).save_to_disk(str(target), num_shards={k: 1 for k, d in sets.items() if not d.num_rows})
    else:
        sets["kept"].save_to_disk(str(target), num_shards=1 if not sets["kept"].num_rows else None)
    return target, counts


def push_to_hub(path: Path, fmt: str, repo: str, private: bool) -> str:
    """Upload an export to the Hugging Face Hub with the user's token (HF_TOKEN or `hf auth login`)."""
    if fmt == "atif":
        raise ExportError(f"an atif export is a folder of trajectory files, not a dataset: upload {path} with "
                          f"`hf upload {repo} {path} --repo-type dataset`")  # fmt: skip
    try:
        from huggingface_hub import HfApi, get_token
    except ImportError:
        raise ExportError("pushing needs huggingface_hub: pip install 'hermes-runner[export]'") from None
    if fmt == "inspect":
        raise ExportError("an Inspect eval log is not a dataset: copy the .eval file where `inspect view` reads it")
    if not get_token():
        raise ExportError("no Hugging Face token: run `hf auth login` or set HF_TOKEN, then push again")
    if fmt in ("openai", "chat"):
        api = HfApi()
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        api.upload_file(path_or_fileobj=str(path), path_in_repo="data/train.jsonl", repo_id=repo, repo_type="dataset")
    elif fmt == "parquet":
        from datasets import Dataset

        Dataset.from_parquet(str(path)).push_to_hub(repo, private=private)
    else:
        from datasets import load_from_disk

        load_from_disk(str(path)).push_to_hub(repo, private=private)
    return f"https://huggingface.co/datasets/{repo}"
