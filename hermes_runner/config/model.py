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
