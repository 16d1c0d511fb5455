"""The root config: every section under one RunConfig, the top-level options, the schemas' registration.

Only the commands, the app and run/ import this module; every other part takes its own section."""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from hermes_runner.config.agent import AgentConfig
from hermes_runner.config.check import run_name_problem
from hermes_runner.config.data import DatasetConfig, FiltersConfig, OutputConfig
from hermes_runner.config.execution import (
    BreakerConfig,
    CacheConfig,
    ExecutorConfig,
    LimitsConfig,
    RetryConfig,
    ShardConfig,
)
from hermes_runner.config.feed import FeedConfig, FeedKind
from hermes_runner.config.model import ModelConfig, ProviderConfig, ReasoningConfig
from hermes_runner.config.sandbox import SandboxConfig
from hermes_runner.config.scorers import ScorerConfig, scorer_set_problems, single_scorer_problem, with_single
from hermes_runner.config.telemetry import TelemetryConfig
from hermes_runner.config.tools import DistributionConfig, ToolsConfig


@dataclass
class RunConfig:
    model: ModelConfig = MISSING
    provider: ProviderConfig = field(default_factory=ProviderConfig)
    reasoning: ReasoningConfig = field(default_factory=ReasoningConfig)
    distribution: DistributionConfig = MISSING
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    filters: FiltersConfig = field(default_factory=FiltersConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    shard: ShardConfig = field(default_factory=ShardConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    # one scorer picked the Hydra way (`scorer=match`, options as `scorer.match.mode=exact`): it joins `scorers`
    # first, named after its kind (so it is the primary unless another says so), and this key becomes null
    scorer: ScorerConfig | None = None
    # scorers by name, each from conf/scorer/ (`+scorer@scorers.NAME=match`, for several); every kept entry gets
    # one score record per scorer, and the primary scorer's value as `reward` (docs/scoring.md)
    scorers: dict[str, ScorerConfig] = field(default_factory=dict)
    retry: RetryConfig = field(default_factory=RetryConfig)  # in-run retries of failed prompts
    breaker: BreakerConfig = field(default_factory=BreakerConfig)  # pauses the run while an error class spikes
    cache: CacheConfig = field(default_factory=CacheConfig)  # replayed model replies (conf/cache/: cache=off ...)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)  # OpenTelemetry spans (docs/telemetry.md)
    agent: AgentConfig = field(default_factory=AgentConfig)  # who drives each prompt (conf/agent/: agent=external ...)
    feed: FeedConfig = field(default_factory=FeedConfig)  # scored groups pushed live to an RL trainer (feed=atropos)

    dataset: DatasetConfig = field(default_factory=DatasetConfig)  # how the rows are read and mapped

    dataset_file: str = MISSING  # a .jsonl/.json/.csv/.parquet file, a save_to_disk directory, or hf:<name>
    run_name: str = MISSING  # a directory name under the output root (`run_name_problem`): no /, not . or ..
    batch_size: int = 10
    num_workers: int = 4
    max_turns: int = 10
    max_samples: int | None = None
    # Runs of each dataset row: k samples, each with its own key (the row's + `~s<i>`; sample 0 keeps the row's),
    # sandbox and toolset draw, `metadata.sample_index` in its entry; pass@k in statistics.json uses this k.
    samples_per_prompt: int = 1
    # Print the results table at the end (model, scorer, n, pass@1 +- stderr, pass@k, tokens, cost;
    # statistics.json `results` holds it either way): +experiment=evaluation turns it on.
    results_table: bool = False
    max_tokens: int | None = None
    system_prompt: str = (
        "You are an autonomous agent with tool access. Work step by step, use the tools "
        "when they help, and finish with a clear final answer."
    )
    ephemeral_system_prompt: str | None = None
    prefill_messages_file: str | None = None
    verbose: bool = False
    log_prefix_chars: int = 100
    seed: int = 0
    resume: bool = True
    force_resume: bool = False
    retry_failed: bool = True
    max_invalid_tool_turns: int = 3
    fsync_interval_s: float = 0.2
    list_distributions: bool = False
    dry_run: bool = False
    progress: bool = True  # the live two-row display on a terminal
    progress_interval_s: float = 30.0  # the plain progress line (logs, run.log, stderr not a terminal): every ...
    progress_every_percent: float = 5.0  # ... this many seconds or this share of the prompts, whichever first
    RULES = {"batch_size": ">= 1", "num_workers": ">= 1", "max_turns": ">= 1", "max_samples": ">= 1",
             "samples_per_prompt": ">= 1", "max_tokens": ">= 1", "max_invalid_tool_turns": ">= 1",
             "log_prefix_chars": ">= 0", "fsync_interval_s": "> 0", "progress_interval_s": "> 0",
             "progress_every_percent": ">= 0"}  # fmt: skip

    def __post_init__(self) -> None:
        """`scorer=KIND` joins `scorers`: both spellings of one scorer make the same config (and run data); a trainer
        feed pushes token ids, so it sets output.tokens."""
        if self.feed.kind != FeedKind.none:
            self.output.tokens = True
        if self.scorer is not None and not single_scorer_problem(self.scorers, self.scorer):
            self.scorers, self.scorer = with_single(self.scorers, self.scorer), None

    def problems(self, where: str) -> list[str]:
        """The rules across sections: a plain run name, the set of scorers, a filter that needs a scorer."""
        found = [why] if (why := run_name_problem(self.run_name)) else []
        if self.filters.min_reward is not None and not self.scorers:
            found.append("filters.min_reward needs a scorer (scorers is empty: add one, e.g. scorer=match)")
        if why := single_scorer_problem(self.scorers, self.scorer):
            found.append(why)
        if self.output.tokens and self.model.stream:
            why = f" (feed={self.feed.kind.value} sets output.tokens)" if self.feed.kind != FeedKind.none else ""
            found.append(f"output.tokens{why} needs model.stream=false (a stream carries no token ids)")
        return found + self._batch_problems() + scorer_set_problems(self.scorers)

    def _batch_problems(self) -> list[str]:
        """Batch mode gathers every session's next call in one process, and sends no streams."""
        if not self.model.batch.enabled:
            return []
        found = []
        if self.executor.backend != "local" or self.executor.processes != 1:
            found.append(
                "model.batch.enabled=true needs every session in one process: executor=local with "
                f"executor.processes=1 (not executor.backend={self.executor.backend}, "
                f"executor.processes={self.executor.processes})"
            )
        if self.model.stream:
            found.append("model.batch.enabled=true sends no streams: set model.stream=false")
        return found


# the config groups (conf/<group>/) and the schema each of their YAMLs is validated against
GROUPS = {"model": ModelConfig, "provider": ProviderConfig, "reasoning": ReasoningConfig,
          "distribution": DistributionConfig, "sandbox": SandboxConfig, "executor": ExecutorConfig,
          "tools": ToolsConfig, "filters": FiltersConfig, "scorer": ScorerConfig, "cache": CacheConfig,
          "agent": AgentConfig, "feed": FeedConfig}  # fmt: skip


def register_configs() -> None:
    """Register the schemas, so that the YAML options of each group are validated against them."""
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    for group, node in GROUPS.items():
        store.store(group=group, name=f"{group}_schema", node=node)
