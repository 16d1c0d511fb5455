"""The model section: the endpoint, its server, prices, rate limits; OpenRouter provider routing and reasoning."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING


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


SERVED = "served"  # model.base_url (and model.name) of a config that serves its own model: filled in at start


@dataclass
class ServeConfig:
    """A model server the runner starts as a child process (embedded/local models)."""

    enabled: bool = False
    # Command to start the server; `{port}`, `{host}`, `{model_path}`, `{name}` (the served model's
    # name: the model file's name when it serves one, else model.name) and
    # `{python}` (this interpreter) are substituted.
    command: list[str] = field(default_factory=list)
    # Path of a GGUF/weights file; `pkg:<dist>/<relpath>` looks it up in site-packages.
    model_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 0  # 0 = pick a free loopback port
    health_path: str = "/v1/models"
    startup_timeout_s: float = 180.0
    stop_timeout_s: float = 10.0  # SIGTERM, then SIGKILL after this long
    env: dict[str, str] = field(default_factory=dict)
    RULES = {"port": ">= 0", "startup_timeout_s": "> 0", "stop_timeout_s": ">= 0"}


@dataclass
class PriceConfig:
    """USD per million tokens, used when the provider reports no cost."""

    prompt_per_mtok: float = 0.0
    completion_per_mtok: float = 0.0
    cached_prompt_per_mtok: float | None = None
    RULES = {"prompt_per_mtok": ">= 0", "completion_per_mtok": ">= 0", "cached_prompt_per_mtok": ">= 0"}


@dataclass
class RateLimitConfig:
    """Client-side limits shared by every session that calls this endpoint."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    adaptive: bool = True  # lower concurrency on 429 episodes, raise it back while calls succeed
    min_concurrency: int = 1
    RULES = {"requests_per_minute": "> 0", "tokens_per_minute": "> 0", "min_concurrency": ">= 1"}


class BatchApi(str, Enum):
    """Which provider batch API carries the calls in batch mode."""

    openai = "openai"  # files + batches (POST /v1/files, /v1/batches; OpenAI and compatible endpoints)


@dataclass
class BatchConfig:
    """Batch mode (model.batch.enabled=true): every session's next call joins the current provider batch, at the
    provider's batch price; each session advances one turn per batch round trip (docs/batch.md)."""

    enabled: bool = False
    api: BatchApi = BatchApi.openai
    max_requests: int = 50_000  # requests in one batch (OpenAI's limit: 50,000 and a 200 MB file)
    poll_s: float = 30.0  # seconds between two status polls of a batch in flight
    max_wait_h: float = 24.0  # a batch still unfinished after this long is cancelled and handled like an expired one
    # a batch goes once every session in flight waits on the model (or max_requests are waiting); it goes this
    # many seconds after that moment, and only if it still holds (a finished session's replacement joins it)
    linger_s: float = 1.0
    discount: float = 0.5  # batch price = model.price x this (OpenAI, Anthropic: half), unless the reply has a cost
    turnaround_h: float = 24.0  # the provider's stated time of one batch (the dry run's hours: turns x this)
    RULES = {"max_requests": ">= 1", "poll_s": "> 0", "max_wait_h": "> 0", "linger_s": ">= 0", "discount": ">= 0",
             "turnaround_h": "> 0"}  # fmt: skip


@dataclass
class ModelConfig:
    name: str = MISSING  # model id sent to the endpoint; `served`: the served model file's name
    base_url: str = MISSING  # `served`: the URL of the server this config starts (serve.enabled)
    api_key_env: str | None = None  # name of the env var holding the key (never the key)
    reasoning_api: ReasoningApi = ReasoningApi.openrouter
    temperature: float | None = None
    timeout_s: float = 600.0
    max_retries: int = 6  # retries per API call (tenacity; the SDK's own retries are off)
    refused_retries: int = 2  # retries (short waits) of a refused connection before the run stops (exit 4)
    retry_initial_wait_s: float = 1.0  # first backoff when the server gives no Retry-After
    retry_max_wait_s: float = 120.0  # cap on any wait, Retry-After included
    max_tokens_param: str = "max_tokens"  # or max_completion_tokens (newer OpenAI models)
    stream: bool = False  # stream replies (SSE); the trajectories are the same either way
    tool_choice: str | None = None  # sent with the tools: auto | required | none (None: endpoint default)
    tool_choice_turns: int | None = None  # send tool_choice only on the first N calls of a prompt (None: every call)
    default_max_tokens: int | None = None  # the run's max_tokens when it sets none (hermes_runner/conf/config.yaml)
    extra_body: dict[str, Any] = field(default_factory=dict)
    default_headers: dict[str, str] = field(default_factory=dict)
    serve: ServeConfig = field(default_factory=ServeConfig)
    price: PriceConfig = field(default_factory=PriceConfig)
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)  # the provider's batch API at its discount
    RULES = {"timeout_s": "> 0", "max_retries": ">= 0", "refused_retries": ">= 0",
             "retry_initial_wait_s": ">= 0", "retry_max_wait_s": ">= 0", "tool_choice_turns": ">= 0"}  # fmt: skip


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
    RULES = {"max_tokens": ">= 1"}
