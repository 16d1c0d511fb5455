"""Rows in, trajectories out: the dataset section, the filters of finished trajectories, the output layout."""

from dataclasses import dataclass, field
from enum import Enum

from hermes_runner.config.templating import problems as template_problems


class DatasetFormat(str, Enum):
    """How `dataset_file` is read (docs/datasets.md)."""

    auto = "auto"  # from the name: hf:<name>, a directory (save_to_disk), .jsonl/.ndjson, .json, .csv, .parquet
    jsonl = "jsonl"  # one JSON object per line
    json = "json"  # a JSON array of objects, or JSON lines
    csv = "csv"  # comma-separated, a header row naming the columns
    parquet = "parquet"  # read in record batches (pyarrow)
    arrow = "arrow"  # a directory written by datasets' `save_to_disk`
    hf = "hf"  # a Hugging Face hub dataset by name, through `datasets` and its cache


@dataclass
class DatasetFields:
    """Which column of a row is what; null: the default names."""

    prompt: str | None = None  # task text or a message list (null: `prompt`, else `input`, `conversations`, `messages`)
    image: str | None = None  # a per-row container image (null: `image`, else `image_name`, else `docker_image`)
    cwd: str | None = None  # a per-row working directory (null: `cwd`)
    id: str | None = None  # a row id: the prompt's identity is then the id, not the row's content (null: none)
    target: str | None = None  # the expected answer, for scorers (null: `target`)
    verify: str | None = None  # a check command or spec, for scorers (null: `verify`)


@dataclass
class DatasetConfig:
    """How the rows of `dataset_file` become prompts (docs/datasets.md)."""

    format: DatasetFormat = DatasetFormat.auto
    fields: DatasetFields = field(default_factory=DatasetFields)
    # A Jinja2 template over the row's columns that makes the prompt text, e.g.
    # "Fix this issue in {{ repo }}:\n{{ problem_statement }}" (null: the prompt column as it is).
    prompt_template: str | None = None
    split: str | None = None  # hf / arrow: which split (null: the only one, else `train`)
    revision: str | None = None  # hf: a branch, tag or commit of the hub repository (null: main)
    subset: str | None = None  # hf: the configuration (subset) name (null: the default one)

    def problems(self, where: str) -> list[str]:
        if self.prompt_template is not None and not self.prompt_template.strip():
            return [f"{where}.prompt_template is empty (null: the prompt column as it is)"]
        return template_problems(self.prompt_template, f"{where}.prompt_template")


class HallucinatedToolPolicy(str, Enum):
    drop = "drop"  # discard the trajectory (the original's behaviour)
    keep = "keep"  # keep it; the failed call is still counted in tool_stats


@dataclass
class FiltersConfig:
    require_reasoning: bool = True  # discard trajectories with no reasoning in any turn
    hallucinated_tools: HallucinatedToolPolicy = HallucinatedToolPolicy.drop  # a call of a tool that does not exist
    min_reward: float | None = None  # discard (reason low_reward) trajectories whose reward is below this (a scorer's)
    # trajectories.jsonl and exports keep only the best sample of each row (highest reward; ties: lowest
    # sample_index); the other samples stay in their batch files and the ledger (docs/scoring.md)
    best_of_k: bool = False


class OutputLayout(str, Enum):
    """Where a trajectory's tool calls live (docs/training.md): exactly one place, so no consumer sees them twice."""

    hermes = "hermes"  # in `value`, as Hermes <tool_call> text (gpt turns) and <tool_response> text (tool turns)
    structured = "structured"  # `value` holds the natural text; every turn has `tool_calls`, arguments as objects


@dataclass
class OutputConfig:
    """The shape of the trajectory files (batch_N.jsonl, trajectories.jsonl, discarded.jsonl)."""

    layout: OutputLayout = OutputLayout.hermes
    # A conversation stopped by max_turns right after tool results gets one more model call without
    # tools, so that it ends on an assistant turn (the original runner's summary call); off: those
    # tool results are trimmed instead. Either way the row keeps its stop_reason.
    final_summary: bool = True
    # Keep every assistant turn's exact prompt and completion token ids and per-token logprobs, as the endpoint
    # returns them (vLLM's return_token_ids and logprobs; SGLang; the embedded llama.cpp server), in the
    # run's tokens/ sidecar (not in the trajectory files), checked for prefix consistency across turns;
    # `hermes-export --format tokens` writes them with loss masks (docs/training.md). Needs model.stream=false.
    tokens: bool = False
