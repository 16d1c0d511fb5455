"""Structured configs: the single source of truth for every option.

The YAML files under ``conf/`` pick values; these dataclasses define which keys
exist and their types, so a typo or a wrong type fails at composition time,
before any model call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import hashlib

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


class Effort(str, Enum):
    none = "none"
    minimal = "minimal"
    low = "low"
    medium = "medium"
    high = "high"
    xhigh = "xhigh"
    max = "max"
    ultra = "ultra"


class ReasoningApi(str, Enum):
    """How an endpoint takes reasoning settings."""

    openrouter = "openrouter"  # `reasoning` object in the request body
    openai = "openai"  # top-level `reasoning_effort` parameter
    both = "both"
    none = "none"  # send nothing


class ProviderSort(str, Enum):
    price = "price"
    throughput = "throughput"
    latency = "latency"


class HallucinatedToolPolicy(str, Enum):
    drop = "drop"  # discard the trajectory (the original's behaviour)
    keep = "keep"  # keep it; the failed call is still counted in tool_stats


@dataclass
class ServeConfig:
    """A model server the runner starts as a child process (embedded/local models)."""

    enabled: bool = False
    # Command to start the server; `{port}`, `{host}`, `{model_path}` and `{python}` are substituted.
    command: list[str] = field(default_factory=list)
    # Path of a GGUF/weights file; `pkg:<dist>/<relpath>` looks it up in site-packages.
    model_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 0  # 0 = pick a free loopback port
    health_path: str = "/v1/models"
    startup_timeout_s: float = 180.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class PriceConfig:
    """USD per million tokens, used when the provider reports no cost."""

    prompt_per_mtok: float = 0.0
    completion_per_mtok: float = 0.0
    cached_prompt_per_mtok: float | None = None


@dataclass
class ModelConfig:
    name: str = MISSING  # model id sent to the endpoint
    base_url: str = MISSING
    api_key_env: str | None = None  # name of the env var holding the key (never the key)
    reasoning_api: ReasoningApi = ReasoningApi.openrouter
    temperature: float | None = None
    timeout_s: float = 600.0
    max_retries: int = 6  # retries per API call (tenacity; the SDK's own retries are off)
    retry_initial_wait_s: float = 1.0  # first backoff when the server gives no Retry-After
    retry_max_wait_s: float = 120.0  # cap on any wait, Retry-After included
    max_tokens_param: str = "max_tokens"  # or max_completion_tokens (newer OpenAI models)
    stream: bool = False  # stream replies (SSE); the trajectories are the same either way
    extra_body: dict[str, Any] = field(default_factory=dict)
    default_headers: dict[str, str] = field(default_factory=dict)
    serve: ServeConfig = field(default_factory=ServeConfig)
    price: PriceConfig = field(default_factory=PriceConfig)


@dataclass
class ProviderConfig:
    """OpenRouter provider routing, sent as the `provider` object in extra_body."""

    only: list[str] | None = None  # providers_allowed
    ignore: list[str] | None = None  # providers_ignored
    order: list[str] | None = None  # providers_order
    sort: ProviderSort | None = None  # provider_sort
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    data_collection: str | None = None


@dataclass
class ReasoningConfig:
    enabled: bool | None = None  # None = provider default; False = disabled
    effort: Effort | None = None
    max_tokens: int | None = None
    exclude: bool | None = None


@dataclass
class DistributionConfig:
    name: str = MISSING
    description: str = ""
    toolsets: dict[str, float] = field(default_factory=dict)  # toolset -> probability in %


@dataclass
class LocalSandboxOptions:
    # "auto": bubblewrap when installed, else unconfined; "bwrap": require it; "none": unconfined
    isolation: str = "auto"
    network: bool = False  # with bwrap: keep the host network
    root: str | None = None  # parent dir of per-task dirs (default: system temp dir)


@dataclass
class DockerSandboxOptions:
    network_mode: str = "none"
    mem_limit: str = "1g"
    nano_cpus: int = 1_000_000_000
    pids_limit: int = 256
    read_only: bool = True
    cap_drop: list[str] = field(default_factory=lambda: ["ALL"])
    security_opt: list[str] = field(default_factory=lambda: ["no-new-privileges"])
    tmpfs: dict[str, str] = field(default_factory=lambda: {"/tmp": "rw,exec,size=512m"})
    user: str | None = "auto"  # "auto": a non-root user when the image has one
    init: bool = True
    pull: bool = False
    pool_size: int = 0  # pre-started containers kept per image
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class SandboxConfig:
    backend: str = "local"  # local | docker
    image: str | None = None  # default image (docker)
    workdir: str = "/workspace"  # default working dir inside a container
    keep: bool = False  # keep the per-task sandbox after the prompt ends
    command_timeout_s: float = 180.0  # default terminal timeout
    max_output_chars: int = 50_000  # terminal output kept (40% head, 60% tail)
    local: LocalSandboxOptions = field(default_factory=LocalSandboxOptions)
    docker: DockerSandboxOptions = field(default_factory=DockerSandboxOptions)


@dataclass
class FiltersConfig:
    require_reasoning: bool = True  # discard trajectories with no reasoning in any turn
    hallucinated_tools: HallucinatedToolPolicy = HallucinatedToolPolicy.drop


@dataclass
class ExecutorConfig:
    backend: str = "local"  # local (asyncio in this process) | ray
    address: str | None = None  # ray: cluster address (None = start a local cluster)
    num_cpus: int | None = None  # ray: CPUs of a local cluster
    sessions_per_worker: int = 32  # ray: sessions multiplexed in one actor


@dataclass
class ShardConfig:
    index: int = 0
    count: int = 1


@dataclass
class LimitsConfig:
    max_cost_usd: float | None = None  # run budget
    max_tokens_total: int | None = None  # run token budget
    prompt_max_tokens: int | None = None  # per-prompt token budget
    prompt_max_cost_usd: float | None = None  # per-prompt cost budget
    timeout_s: float | None = None  # per-prompt wall clock


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

    dataset_file: str = MISSING
    run_name: str = MISSING
    batch_size: int = 10
    num_workers: int = 4
    max_turns: int = 10
    max_samples: int | None = None
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
    progress: bool = True


def safe_dirname(text: str, limit: int = 160) -> str:
    """A job's override string as one directory name: no path separators, bounded length."""
    name = text.replace("/", "_").replace("\\", "_") or "default"
    if len(name) > limit:
        name = f"{name[: limit - 17]}-{hashlib.sha1(name.encode()).hexdigest()[:16]}"
    return name


def register_configs() -> None:
    """Register schemas so YAML options in each group are validated against them."""
    if not OmegaConf.has_resolver("hr.dirname"):
        OmegaConf.register_new_resolver("hr.dirname", safe_dirname)
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="provider", name="provider_schema", node=ProviderConfig)
    cs.store(group="reasoning", name="reasoning_schema", node=ReasoningConfig)
    cs.store(group="distribution", name="distribution_schema", node=DistributionConfig)
    cs.store(group="sandbox", name="sandbox_schema", node=SandboxConfig)
    cs.store(group="executor", name="executor_schema", node=ExecutorConfig)
