"""The real consumers of our trajectory files, each installed from PyPI into its own venv (tests/consumers/):
HF datasets 4.0.0 (LLaMA-Factory's pin) and 5.x, TRL's ShareGPT conversion and chat templating, LLaMA-Factory's
dataset parser and ShareGPT converter, and axolotl's chat_template message mapping, over files written by real
runs of the runner against the scripted endpoint: chat-only rows, tool rows, images and cwd on some rows only,
max_turns stops, invalid-call stops, discards and failures, across several batch files (docs/training.md)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from hermes_runner.commands.export import main as export_main
from hermes_runner.config import OutputLayout
from hermes_runner.testing.scripted_server import ScriptedServer
from hermes_runner.trajectory.entry import FEATURES_FILE
from hermes_runner.trajectory.export import export
from hermes_runner.trajectory.openai import to_openai

from tests.helpers.consumers import run_consumer
from tests.helpers.openai_ft import check_file
from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.trl_training import HERMES3_TEMPLATE, TRAIN, recipes

TRAINING_DOC = ROOT / "docs" / "training.md"


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def mixed_prompts(workdir: Path) -> list[dict]:
    """The first batch (4 rows) is chat only, with no image or cwd; later batches mix everything."""
    chat = [
        {"prompt": script({"reasoning": f"Easy {i}.", "content": f"Answer {i}."}, text=f"chat {i}")} for i in range(4)
    ]
    tools = script(
        {"reasoning": "Write it.", "tool_calls": [_call("write_file", path="n.txt", content="alpha\n")]},
        {"reasoning": "Read it.", "tool_calls": [_call("read_file", path="n.txt"), _call("terminal", command="ls")]},
        {"reasoning": "Done.", "content": "n.txt holds alpha."},
        text="tools",
    )
    looping = script(
        *[{"reasoning": "Again.", "tool_calls": [_call("terminal", command="echo loop")]}] * 6, text="loop"
    )
    invalid = script(
        *[{"reasoning": "Try.", "tool_calls": [{"name": "terminal", "arguments": "{bad"}]}] * 4, text="bad"
    )
    huge = {"prompt_tokens": 900_000, "completion_tokens": 10, "total_tokens": 900_010}
    costly = script({"reasoning": "Big.", "usage": huge, "tool_calls": [_call("terminal", command="ls")]}, text="big")
    return [
        *chat,
        {"prompt": tools, "image": "local/bookworm:ci", "n": 1, "tags": ["a", "b"]},
        {"prompt": looping, "cwd": str(workdir), "n": "one"},
        {"prompt": script({"content": "No thinking."}, text="bare")},  # discarded: no reasoning
        {"prompt": script({"fail": [{"status": 400, "message": "context length exceeded"}]}, text="fails")},
        {"prompt": invalid, "meta": {"k": [1, 2]}},
        {"prompt": looping.replace("loop", "loop 2"), "image": "local/busybox:ci", "cwd": str(workdir)},
        {"prompt": script({"reasoning": "Hm.", "content": "Plain."}, text="chat late"), "image": "img:x"},
        {"prompt": tools.replace("tools", "tools 2"), "meta": None},
        {"prompt": costly},  # stops on limits.prompt_max_tokens, right after the assistant's call
    ]


def with_targets(rows: list[dict]) -> list[dict]:
    """Targets for a scored run: chat 0 and 1 pass, chat 2 fails, the other rows have none."""
    wants = {0: "Answer 0", 1: "Answer 1", 2: "Answer 9"}
    return [{**row, "want": wants[i]} if i in wants else row for i, row in enumerate(rows)]


def make_mixed_run(server: ScriptedServer, base: Path, name: str, *overrides: str, k: int = 1) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    workdir = base / "workdir"
    workdir.mkdir(exist_ok=True)
    ds = write_jsonl(base / f"{name}.jsonl", with_targets(mixed_prompts(workdir)))
    cfg = compose_cfg(
        base_overrides(server, base)
        + [f"run_name={name}", f"dataset_file={ds}", "batch_size=4", "max_turns=3", "sandbox.local.isolation=none"]
        + ["limits.prompt_max_tokens=500000", f"samples_per_prompt={k}"]
        + list(overrides)
    )
    run_dir = base / name
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 1 and stats is not None  # one prompt fails by design
    assert stats["prompts"]["ok"] == 11 * k  # (a scripted failure is spent once: a second sample goes on)
    assert k > 1 or (stats["prompts"]["discarded"] == 1 and stats["prompts"]["failed"] == 1)
    return run_dir


@pytest.fixture(scope="module")
def mixed(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _server.reset()
    return make_mixed_run(_server, tmp_path_factory.mktemp("consumers"), "mixed")


@pytest.fixture(scope="module")
def scored(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed run again with a match scorer: some rows pass, some fail, the rest have no target (a failed score)."""
    _server.reset()
    return make_mixed_run(
        _server,
        tmp_path_factory.mktemp("scored"),
        "scored",
        "+scorer@scorers.answer=match",
        "dataset.fields.target=want",
    )


@pytest.fixture(scope="module")
def sampled(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed run with k = 2 samples of each row."""
    _server.reset()
    return make_mixed_run(_server, tmp_path_factory.mktemp("sampled"), "sampled", k=2)


@pytest.fixture(scope="module")
def big(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trajectories.jsonl over 10 MB (datasets' JSON chunk) whose images, cwd and tool calls come only late."""
    _server.reset()
    base = tmp_path_factory.mktemp("big")
    filler = "lorem ipsum dolor sit amet " * 4_000  # ~108 kB in the prompt and again in the answer
    rows = [{"prompt": script({"reasoning": "Long.", "content": filler}, text=f"long {i} {filler}")} for i in range(56)]
    rows += [{**r, "prompt": r["prompt"].replace("chat", "late chat")} for r in mixed_prompts(base)[4:]]
    ds = write_jsonl(base / "big.jsonl", rows)
    cfg = compose_cfg(
        base_overrides(_server, base)
        + ["run_name=big", f"dataset_file={ds}", "batch_size=100", "max_turns=3", "sandbox.local.isolation=none"]
    )
    run_inprocess(cfg, base / "big")
    assert (base / "big" / "trajectories.jsonl").stat().st_size > 12_000_000
    return base / "big"


# -- what each kept row holds -------------------------------------------------------------------


def after_system(text: str) -> str:
    """A rendered conversation without its first (system) turn, whose tool instructions show the tags."""
    return text.split("<|im_end|>", 1)[1]


def calls_in_source(entry: dict) -> int:
    return sum(t["value"].count("<tool_call>") for t in entry["conversations"] if t["from"] == "gpt")


def test_every_kept_row_ends_on_an_assistant_turn_and_keeps_its_stop_reason(mixed: Path) -> None:
    entries = read_jsonl(mixed / "trajectories.jsonl")
    assert len(entries) == 11
    stops = sorted(e["stop_reason"] for e in entries)
    assert stops == ["final_answer"] * 7 + ["invalid_tool_calls"] + ["max_turns"] * 2 + ["token_limit"]
    for e in entries:
        assert e["conversations"][-1]["from"] == "gpt"
        assert all(set(t) == {"from", "value"} for t in e["conversations"])  # hermes layout: no tool_calls key
    loops = [e for e in entries if e["stop_reason"] == "max_turns"]
    for e in loops:  # 3 turns with tools, then the tool-less summary call: tool results kept, answer last
        assert [t["from"] for t in e["conversations"]][-3:] == ["gpt", "tool", "gpt"]
        assert e["api_calls"] == 4 and "<tool_call>" not in e["conversations"][-1]["value"]
        assert not e["completed"] and not e["partial"]
    bad = next(e for e in entries if e["stop_reason"] == "invalid_tool_calls")
    assert bad["partial"] and bad["conversations"][-1]["value"].count("<tool_call>") == 1  # results trimmed
    costly = next(e for e in entries if e["stop_reason"] == "token_limit")  # stopped before its call ran
    assert costly["partial"] and [t["from"] for t in costly["conversations"]] == ["system", "human", "gpt"]
    # Image, cwd and the row's own fields: strings in every row, the fields as one JSON text.
    meta = [e["metadata"] for e in entries]
    assert {type(m["image"]) for m in meta} == {str} and {m["image"] for m in meta} >= {"", "local/bookworm:ci"}
    assert {json.dumps(json.loads(m["row_fields"]).get("n")) for m in meta} == {"null", "1", '"one"'}
    discarded = read_jsonl(mixed / "discarded.jsonl")
    assert [d["discard_reason"] for d in discarded] == ["no_reasoning"]
    assert {tuple(d) for d in discarded + entries} == {tuple(entries[0])}  # one set of keys, in one order


def test_max_turns_without_final_summary_trims_to_the_assistant_turn(_server: ScriptedServer, tmp_path: Path) -> None:
    _server.reset()
    run = make_mixed_run(_server, tmp_path, "trim", "output.final_summary=false")
    loops = [e for e in read_jsonl(run / "trajectories.jsonl") if e["stop_reason"] == "max_turns"]
    assert len(loops) == 2
    for e in loops:
        assert e["api_calls"] == 3 and e["conversations"][-1]["from"] == "gpt"
        assert e["conversations"][-1]["value"].count("<tool_call>") == 1  # the unanswered last call, once
    path, _ = export(run, "openai", tmp_path / "oa")  # a line may end on calls: OpenAI's rules allow it
    assert check_file(path) == Counter()
    assert sum(r["messages"][-1].get("tool_calls") is not None for r in read_jsonl(path)) >= 2


# -- HF datasets, both major versions ---------------------------------------------------------

LOAD = r"""
import json, os, sys, tempfile
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp()
import datasets
sets, features_file = json.loads(sys.argv[1]), sys.argv[2]
out = {"version": datasets.__version__, "sets": {}}
for name, files in sets.items():
    ds = datasets.load_dataset("json", data_files=files, split="train", cache_dir=tempfile.mkdtemp())
    conv = ds.features["conversations"]
    out["sets"][name] = {"rows": ds.num_rows, "features": ds.features.to_dict(), "conversations": repr(conv),
                         "last": [r["conversations"][-1]["from"] for r in ds]}
features = datasets.Features.from_dict(json.load(open(features_file)))
ds = datasets.load_dataset("json", data_files=sets["all"], features=features, split="train", cache_dir=tempfile.mkdtemp())
out["with_features"] = {"rows": ds.num_rows, "features": ds.features.to_dict()}
print(json.dumps(out))
"""


def load_everywhere(run: Path, venv: str) -> dict:
    batches = sorted(str(p) for p in run.glob("batch_*.jsonl"))
    sets = {
        "batches": batches,
        "trajectories": [str(run / "trajectories.jsonl")],
        "discarded": [str(run / "discarded.jsonl")],
        "all": batches + [str(run / "discarded.jsonl"), str(run / "trajectories.jsonl")],
    }
    sets = {k: v for k, v in sets.items() if all(Path(f).exists() for f in v)}
    return json.loads(run_consumer(venv, LOAD, json.dumps(sets), str(run / FEATURES_FILE)).stdout.splitlines()[-1])


@pytest.mark.parametrize("venv", ["datasets4", "datasets5"])
def test_datasets_loads_every_file_of_a_mixed_run_with_one_schema(mixed: Path, venv: str) -> None:
    assert len(list(mixed.glob("batch_*.jsonl"))) == 4
    out = load_everywhere(mixed, venv)
    assert out["version"].startswith("4.0.0" if venv == "datasets4" else "5.")
    written = json.loads((mixed / FEATURES_FILE).read_text())
    for name, got in out["sets"].items():
        assert got["features"] == written, name  # plain load: the features the run wrote beside its files
        assert got["conversations"].startswith("List({") and "Json" not in got["conversations"]
        assert set(got["last"]) == {"gpt"}
    assert out["sets"]["all"]["rows"] == 2 * 11 + 1  # every batch line, the discarded one, the merge
    assert out["with_features"] == {"rows": 23, "features": written}


@pytest.mark.parametrize("venv", ["datasets4", "datasets5"])
def test_datasets_loads_scored_and_unscored_runs_mixed_with_one_schema(mixed: Path, scored: Path, venv: str) -> None:
    """Batch files of a scored run and an unscored one, interleaved, loaded in one call: one schema, every row."""
    plain, judged = (sorted(str(p) for p in run.glob("batch_*.jsonl")) for run in (mixed, scored))
    interleaved = [f for pair in zip(judged, plain, strict=True) for f in pair]
    files = {
        "scored_first": judged + plain,
        "interleaved": interleaved,
        "all": interleaved + [str(scored / "trajectories.jsonl"), str(mixed / "discarded.jsonl")],
    }
    out = json.loads(run_consumer(venv, LOAD, json.dumps(files), str(scored / FEATURES_FILE)).stdout.splitlines()[-1])
    written = json.loads((scored / FEATURES_FILE).read_text())
    assert written == json.loads((mixed / FEATURES_FILE).read_text())  # scoring does not change the schema
    for name, got in out["sets"].items():
        assert got["features"] == written, name
    assert out["sets"]["interleaved"]["rows"] == 2 * 11 and out["with_features"]["rows"] == 2 * 11 + 11 + 1
    rewards = [e["reward"] for e in read_jsonl(scored / "trajectories.jsonl")]
    verdicts = [(s["name"], s["passed"], bool(s["error"])) for e in read_jsonl(scored / "trajectories.jsonl")
                for s in e["scores"]]  # fmt: skip
    assert sorted(rewards) == [0.0] * 9 + [1.0] * 2
    assert verdicts.count(("answer", True, False)) == 2 and verdicts.count(("answer", False, False)) == 1
    assert verdicts.count(("answer", False, True)) == 8  # no target: a failed score, every key still there


@pytest.mark.parametrize("venv", ["datasets4", "datasets5"])
def test_datasets_loads_a_trajectories_file_over_10_mb_with_late_sparse_values(big: Path, venv: str) -> None:
    out = load_everywhere(big, venv)
    written = json.loads((big / FEATURES_FILE).read_text())
    assert out["sets"]["trajectories"]["rows"] == 56 + 7
    for name, got in out["sets"].items():
        assert got["features"] == written, name


# -- TRL ------------------------------------------------------------------------------------------

# A ChatML tool-use template in the Hermes 3 style that renders any role, and the structured `tool_calls`
# of any message that has them, as <tool_call> blocks (so calls given twice would show twice).
HERMES_TEMPLATE = """
{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] }}
{%- if message.tool_calls %}{%- for tc in message.tool_calls %}
{{- '\n<tool_call>\n{"name": "' + tc.function.name + '", "arguments": ' + (tc.function.arguments | tojson) + '}\n</tool_call>' }}
{%- endfor %}{%- endif %}
{{- '<|im_end|>\n' }}
{%- endfor %}
"""

TRL = r"""
import json, os, sys, tempfile
from pathlib import Path
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp()
import datasets, trl
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from trl.data_utils import apply_chat_template, is_conversational_from_value, maybe_convert_to_chatml

def tokenizer(template):
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                  unk_token="<unk>", eos_token="<|im_end|>")
    tok.chat_template = template
    return tok

args = json.loads(sys.argv[1])
out = {}
# 1. ShareGPT files as SFTTrainer takes them: maybe_convert_to_chatml, then the chat template.
ds = datasets.load_dataset("json", data_files=args["sharegpt"], split="train", cache_dir=tempfile.mkdtemp())
assert is_conversational_from_value(ds[0])
tok = tokenizer(args["hermes_template"])
rendered = []
for row in ds:
    example = maybe_convert_to_chatml({"conversations": row["conversations"]})
    rendered.append(apply_chat_template(example, tok)["text"])
out["sharegpt"] = [{"prompt_key": r["metadata"]["prompt_key"], "text": t} for r, t in zip(ds, rendered)]
# 2. The chat export with TRL's own Qwen2.5 template, tools parsed from their JSON text as SFTTrainer does.
qwen = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
tok = tokenizer(qwen)
for mode in ("plain", "features"):
    kw = {}
    if mode == "features":
        kw["features"] = datasets.Features.from_dict(json.load(open(args["openai_features"])))
    ds = datasets.load_dataset("json", data_files=args["openai"], split="train", cache_dir=tempfile.mkdtemp(), **kw)
    out[mode] = {"features": repr(ds.features["messages"]), "rows": []}
    for row in ds:
        tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
        text = apply_chat_template({"messages": row["messages"]}, tok, tools=tools)["text"]
        out[mode]["rows"].append({"id": row["id"], "text": text})
print(json.dumps(out))
"""


@pytest.mark.parametrize("run", ["mixed", "scored"])
def test_trl_renders_each_tool_call_once(run: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    mixed = request.getfixturevalue(run)
    path, _ = export(mixed, "chat", tmp_path / "chat")
    args = {
        "sharegpt": sorted(str(p) for p in mixed.glob("batch_*.jsonl")),
        "hermes_template": HERMES_TEMPLATE,
        "openai": str(path),
        "openai_features": str(path.parent / FEATURES_FILE),
    }
    out = json.loads(run_consumer("trl", TRL, json.dumps(args)).stdout.splitlines()[-1])
    source = {e["metadata"]["prompt_key"]: e for e in read_jsonl(mixed / "trajectories.jsonl")}
    assert len(out["sharegpt"]) == 11 and sum(calls_in_source(e) for e in source.values()) > 5
    for r in out["sharegpt"]:
        assert after_system(r["text"]).count("<tool_call>") == calls_in_source(source[r["prompt_key"]])
    for mode in ("plain", "features"):
        assert "Json" in out[mode]["features"]  # arguments stay JSON objects, whatever their keys
        assert len(out[mode]["rows"]) == 11
        for r in out[mode]["rows"]:
            entry = source[r["id"]]
            answer = after_system(r["text"])
            assert answer.count("<tool_call>") == calls_in_source(entry), r["id"]
            for m in re.finditer(r"<tool_call>\n(.*?)\n</tool_call>", answer, re.S):
                args = json.loads(m.group(1))["arguments"]
                assert isinstance(args, dict) and None not in args.values()  # an object, encoded once, as made


# -- OpenAI fine-tuning --------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["mixed", "scored", "sampled"])
def test_openai_export_passes_openais_fine_tuning_rules(run: str, request: pytest.FixtureRequest, tmp_path: Path):
    """Parallel calls, max_turns stops (ended by the final summary; trimmed ones: the test above), invalid-call
    and token-limit stops, reasoning, scores and k samples: every line of `--to openai` passes OpenAI's rules
    (tests/helpers/openai_ft.py), with each call of the run once."""
    source = request.getfixturevalue(run)
    path, counts = export(source, "openai", tmp_path / "oa")
    rows = read_jsonl(path)
    assert counts["kept"] == len(rows) == len(read_jsonl(source / "trajectories.jsonl")) >= 11
    assert check_file(path) == Counter()
    made = sum(calls_in_source(e) for e in read_jsonl(source / "trajectories.jsonl"))
    assert sum(len(m.get("tool_calls", [])) for r in rows for m in r["messages"]) == made
    assert any(len(m.get("tool_calls", [])) > 1 for r in rows for m in r["messages"])  # parallel calls are there
    assert all(isinstance(r["tools"], list) for r in rows)


# -- axolotl ----------------------------------------------------------------------------------------

# axolotl (type: chat_template) is too heavy to install here (torch, its training stack): this reproduces
# its documented message mapping, ChatTemplateStrategy.transform_message in axolotl 0.19: each
# message_property_mappings key (role <- from, content <- value) is copied, roles are mapped (human -> user,
# gpt -> assistant), every other message key the template uses (tool_calls, tool_call_id, name) is passed
# through when not None, and string tool-call arguments are json-decoded; then transformers renders the
# template. The template is Qwen2.5's, as TRL ships it.
AXOLOTL = r"""
import json, sys
from pathlib import Path
import trl
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

# axolotl's default roles, with the `roles` of the recipe in docs/training.md: tool turns -> user
ROLES = {"human": "user", "user": "user", "assistant": "assistant", "gpt": "assistant", "system": "system", "tool": "user"}
MAPPINGS = {"role": "from", "content": "value"}
TEMPLATE_VARIABLES = ("tool_calls", "tool_call_id", "name")

def transform_message(message):
    out = {k: message[v] for k, v in MAPPINGS.items() if message.get(v) is not None}
    out["role"] = ROLES.get(out["role"], out["role"])
    for key in set(message) - set(MAPPINGS.values()):
        if key in TEMPLATE_VARIABLES and message.get(key) is not None:
            out[key] = message[key]
    for call in out.get("tool_calls") or []:
        if isinstance(call.get("function", {}).get("arguments"), str):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out

tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")),
                              unk_token="<unk>", eos_token="<|im_end|>")
tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
out = []
for line in open(sys.argv[1]):
    row = json.loads(line)
    messages = [transform_message(m) for m in row["conversations"]]
    out.append({"prompt_key": row["metadata"]["prompt_key"], "text": tok.apply_chat_template(messages, tokenize=False)})
print(json.dumps(out))
"""


def test_axolotl_chat_template_mapping_renders_each_tool_call_once(mixed: Path) -> None:
    source = {e["metadata"]["prompt_key"]: e for e in read_jsonl(mixed / "trajectories.jsonl")}
    out = json.loads(run_consumer("trl", AXOLOTL, str(mixed / "trajectories.jsonl")).stdout.splitlines()[-1])
    assert len(out) == 11
    for r in out:
        text = after_system(r["text"])
        entry = source[r["prompt_key"]]
        assert text.count("<tool_call>") == calls_in_source(entry)
        results = sum(t["value"].count("<tool_response>") for t in entry["conversations"] if t["from"] == "tool")
        assert text.count("<tool_response>") == results  # tool results wrapped once too
        assert text.rstrip().endswith("<|im_end|>") and "<|im_start|>assistant" in text


# -- LLaMA-Factory ------------------------------------------------------------------------------------

# LLaMA-Factory's parser (dataset_info.json -> DatasetAttr) and ShareGPT converter, the real modules of
# llamafactory 0.9.5, loaded without the package __init__ files (they import torch, transformers and peft).
# Two modules they import are given here: extras.constants (two file names from it) and extras.misc (whether
# ModelScope/OpenMind hubs are on: no).
LLAMAFACTORY = r"""
import importlib.util, json, os, sys, tempfile, types
from pathlib import Path
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp()
import datasets
spec = importlib.util.find_spec("llamafactory")
root = Path(spec.submodule_search_locations[0])
for name, sub in (("llamafactory", ""), ("llamafactory.extras", "extras"), ("llamafactory.data", "data")):
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(root / sub)]
    sys.modules[name] = pkg
constants = types.ModuleType("llamafactory.extras.constants")
constants.DATA_CONFIG, constants.RUNNING_LOG = "dataset_info.json", "running_log.txt"
misc = types.ModuleType("llamafactory.extras.misc")
misc.use_modelscope = misc.use_openmind = lambda: False
sys.modules.update({"llamafactory.extras.constants": constants, "llamafactory.extras.misc": misc})
def load(name, rel):
    s = importlib.util.spec_from_file_location(name, root / rel)
    m = importlib.util.module_from_spec(s)
    sys.modules[name] = m
    s.loader.exec_module(m)
    return m
load("llamafactory.extras.logging", "extras/logging.py")
load("llamafactory.data.data_utils", "data/data_utils.py")
parser = load("llamafactory.data.parser", "data/parser.py")
converter = load("llamafactory.data.converter", "data/converter.py")

dataset_dir, name = sys.argv[1], sys.argv[2]
attr = parser.get_dataset_list([name], dataset_dir)[0]
files = [os.path.join(dataset_dir, attr.dataset_name)]
ds = datasets.load_dataset("json", data_files=files, split="train", cache_dir=tempfile.mkdtemp())
data_args = types.SimpleNamespace(streaming=False, preprocessing_num_workers=None, overwrite_cache=True, media_dir=dataset_dir)
training_args = types.SimpleNamespace(local_process_index=0)
aligned = converter.align_dataset(ds, attr, data_args, training_args)
print(json.dumps([{"prompt": r["_prompt"], "response": r["_response"], "system": r["_system"]} for r in aligned]))
"""


def dataset_info_entry() -> dict:
    """The dataset_info.json of docs/training.md (the block after its `dataset_info.json` marker)."""
    text = TRAINING_DOC.read_text()
    block = text.split("<!-- dataset_info.json -->", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)


@pytest.mark.parametrize("run", ["mixed", "scored"])
def test_llamafactory_converter_keeps_every_row(run: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    mixed = request.getfixturevalue(run)
    info = dataset_info_entry()
    (name,) = info
    assert set(info[name]["tags"]) == {
        "role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag", "function_tag", "system_tag",
    }  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    (data / info[name]["file_name"]).write_bytes((mixed / "trajectories.jsonl").read_bytes())
    (data / "dataset_info.json").write_text(json.dumps(info))
    rows = json.loads(run_consumer("llamafactory", LLAMAFACTORY, str(data), name).stdout.splitlines()[-1])
    entries = read_jsonl(mixed / "trajectories.jsonl")
    assert len(rows) == len(entries) == 11
    for row, entry in zip(rows, entries, strict=True):
        assert row["response"] and row["response"][0]["role"] == "assistant", entry.get("stop_reason")  # kept
        assert row["system"].startswith("You are a function-calling AI model")
        turns = entry["conversations"][1:]
        assert [m["content"] for m in row["prompt"] + row["response"]] == [t["value"] for t in turns]
        roles = {"human": "user", "gpt": "assistant", "tool": "observation"}
        assert [m["role"] for m in row["prompt"] + row["response"]] == [roles[t["from"]] for t in turns]


# -- the structured layout --------------------------------------------------------------------------


LOAD_STRUCTURED = r"""
import json, os, sys, tempfile
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp()
import datasets
features = datasets.Features.from_dict(json.load(open(sys.argv[2])))
ds = datasets.load_dataset("json", data_files=json.loads(sys.argv[1]), features=features, split="train",
                           cache_dir=tempfile.mkdtemp())
print(json.dumps([[c["function"]["arguments"] for t in r["conversations"] for c in t["tool_calls"]] for r in ds]))
"""


def test_structured_layout_keeps_the_calls_once_as_objects(_server: ScriptedServer, tmp_path: Path, mixed: Path):
    _server.reset()
    run = make_mixed_run(_server, tmp_path, "structured", "output.layout=structured")
    entries = read_jsonl(run / "trajectories.jsonl")
    hermes = {
        e["prompt_index"]: e for e in read_jsonl(mixed / "trajectories.jsonl")
    }  # same prompts (keys: cwd differs)
    for e in entries:
        assert all(set(t) == {"from", "value", "tool_calls"} for t in e["conversations"])
        for t in e["conversations"][1:]:  # the system turn shows the format in its instructions
            assert "<tool_call>" not in t["value"]
            assert all(isinstance(c["function"]["arguments"], dict) for c in t["tool_calls"])
        calls = sum(len(t["tool_calls"]) for t in e["conversations"])
        assert calls == calls_in_source(hermes[e["prompt_index"]])
        # Both layouts read back to the same OpenAI messages (ids aside: the scripted ids differ per run).
        same = hermes[e["prompt_index"]]
        strip = json.loads(re.sub(r'"call_[0-9_]+"', '"id"', json.dumps(to_openai(e))))
        assert strip == json.loads(re.sub(r'"call_[0-9_]+"', '"id"', json.dumps(to_openai(same))))
    features = json.loads((run / FEATURES_FILE).read_text())
    assert features["conversations"]["feature"]["tool_calls"]["feature"]["function"]["arguments"] == {"_type": "Json"}
    # datasets 5 with the run's features: every file at once, the calls' arguments back as they were made.
    files = sorted(str(p) for p in run.glob("batch_*.jsonl"))
    got = json.loads(run_consumer("datasets5", LOAD_STRUCTURED, json.dumps(files), str(run / FEATURES_FILE)).stdout)
    made = [[c["function"]["arguments"] for t in e["conversations"] for c in t["tool_calls"]] for e in entries]
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, made))
    assert json.loads((run / "run.json").read_text())["data_config"]["output.layout"] == OutputLayout.structured.value


# -- TRL training: the recipes of docs/training.md, as written -----------------------------------------------


def test_trl_recipes_train_exactly_the_assistant_turns(mixed: Path, tmp_path: Path) -> None:
    """A real SFTTrainer (assistant_only_loss=True) on a tiny local model, for each TRL recipe: finite, falling
    loss; the trained text of each row is its assistant turns, each once, reasoning and calls included (the chat
    export with `--reasoning inline`, as the recipe says). Hermes 3's tool_use template renders every final
    answer and every call of both once."""
    assert export_main([str(mixed), "--to", "chat", "--reasoning", "inline"]) == 0  # the recipe's command
    chat = mixed / "export" / "chat" / "trajectories.chat.jsonl"
    model_dir = tmp_path / "tiny-qwen2"
    args = {
        "model_dir": str(model_dir),
        "texts": [str(mixed / "trajectories.jsonl"), str(chat)],
        "recipes": recipes(mixed, model_dir),
        "hermes3": str(HERMES3_TEMPLATE),
        "chat": str(chat),
        "chat_features": str(chat.parent / FEATURES_FILE),
        "trajectories": str(mixed / "trajectories.jsonl"),
    }
    assert set(args["recipes"]) == {"trl-chat", "trl-hermes"}
    out = json.loads(run_consumer("trl", TRAIN, json.dumps(args), timeout=1200).stdout.splitlines()[-1])
    source = {e["metadata"]["prompt_key"]: e for e in read_jsonl(mixed / "trajectories.jsonl")}
    chat_rows = {r["id"]: r for r in read_jsonl(chat)}
    order = {"trl-chat": list(chat_rows), "trl-hermes": list(source)}
    for name, keys in order.items():
        got = out[name]
        assert got["steps"] == 3 and len(got["losses"]) == 3 and all(math.isfinite(x) for x in got["losses"])
        assert got["losses"][-1] < got["losses"][0], got["losses"]
        for key, row in zip(keys, got["rows"], strict=True):
            turns = [t["value"] for t in source[key]["conversations"] if t["from"] == "gpt"]
            assert row["trained"] == [f"\n{v}<|im_end|>\n" for v in turns], (name, key)  # each turn, nothing else
    for name in ("hermes3_chat", "hermes3_hermes"):
        assert len(out[name]) == 11
        for r in out[name]:
            entry, text = source[r["id"]], r["text"].split("<|im_start|>user", 1)[1]
            assert text.count("<tool_call>") == calls_in_source(entry), (name, r["id"])
            assert "<|im_start|>assistant<|im_end|>" not in text  # no answer lost
            said = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", text, re.S)  # the assistant turns
            if name == "hermes3_chat":  # (the template renders a calling turn as its calls only)
                messages = chat_rows[r["id"]]["messages"]
                finals = [m["content"] for m in messages if m["role"] == "assistant" and "tool_calls" not in m]
                assert [t for t in said if not t.startswith("<tool_call>")] == finals, r["id"]
            else:
                assert said == [t["value"] for t in entry["conversations"] if t["from"] == "gpt"], r["id"]
