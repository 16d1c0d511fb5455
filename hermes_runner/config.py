"""Structured configs: the single source of truth for every option.

The YAML files under ``hermes_runner/conf/`` pick values; these dataclasses define which keys
exist and their types, so a typo or a wrong type fails at composition time,
before any model call.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from hermes_runner.errors import ConfigError


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


@dataclass
class PriceConfig:
    """USD per million tokens, used when the provider reports no cost."""

    prompt_per_mtok: float = 0.0
    completion_per_mtok: float = 0.0
    cached_prompt_per_mtok: float | None = None


@dataclass
class RateLimitConfig:
    """Client-side limits shared by every session that calls this endpoint."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    adaptive: bool = True  # lower concurrency on 429 episodes, raise it back while calls succeed
    min_concurrency: int = 1


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


class LocalIsolation(str, Enum):
    """How the local sandbox confines commands (docs/sandboxes.md)."""

    auto = "auto"  # the same as bwrap: confined, or the run refuses to start and says what is missing
    bwrap = "bwrap"  # bubblewrap + an unprivileged uid without capabilities + limits
    none = "none"  # explicit opt-out: commands run unconfined, as the runner's user


@dataclass
class LocalSandboxOptions:
    isolation: LocalIsolation = LocalIsolation.auto
    network: bool = False  # with bwrap: keep the host network
    root: str | None = None  # parent dir of per-task dirs (default: ~/.cache/hermes-runner/sandboxes)
    # read-only system paths a command sees (nothing else of the host but its own work dir and /tmp)
    system_paths: list[str] = field(
        default_factory=lambda: ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]
    )
    uid_base: int = 1_900_000_000  # a root runner runs each prompt as its own uid from here (no passwd entry)
    pids_limit: int = 256  # processes and threads per prompt (0: none)
    mem_limit: str | None = "1g"  # memory per prompt, no swap (null: none); + disk_limit when its files are a tmpfs
    cpus: float = 1.0  # CPU cores per prompt (0: none; needs cgroups)
    # what a prompt's work dir and /tmp may hold together, and its largest file (null: no cap; docs/sandboxes.md)
    disk_limit: str | None = "1g"
    seccomp: bool = True  # deny keyrings, mounts, namespaces, ptrace, bpf, kernel modules... (EPERM)


class DockerExecMode(StrEnum):
    """How a Docker sandbox runs each tool call (docs/docker.md#how-tool-calls-reach-the-container)."""

    shell = "shell"  # one long-lived shell per container (one exec at start) runs every call
    exec = "exec"  # a `docker exec` per call (three engine round trips and a runc exec each)


@dataclass
class DockerSandboxOptions:
    """One container per prompt; every isolation default can be relaxed here."""

    network_mode: str = "none"  # none | bridge | host | a network name
    mem_limit: str | None = "1g"
    memswap_limit: str | None = None  # None: same as mem_limit (no swap)
    cpus: float = 1.0
    pids_limit: int = 256
    read_only: bool = True  # read-only root; the working dir and `tmpfs` paths stay writable
    tmpfs: dict[str, str] = field(default_factory=lambda: {"/tmp": "rw,exec,nosuid,nodev,size=512m,mode=1777"})
    workdir_tmpfs: str = "rw,exec,nosuid,nodev,size=1g"  # mount options of the working dir's tmpfs
    cap_drop: list[str] = field(default_factory=lambda: ["ALL"])
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=lambda: ["no-new-privileges"])
    user: str | None = "auto"  # "auto": a non-root user when the image has one; None: the image's default
    init: bool = True
    runtime: str | None = None  # e.g. runsc (gVisor)
    volumes: list[str] = field(default_factory=list)  # "host:container[:ro]" binds: state that outlives a prompt
    env: dict[str, str] = field(default_factory=dict)  # the only variables set in the container
    pull: bool = False  # pull images missing locally
    pool_size: int = 2  # containers started ahead per (image, working dir); each serves one prompt
    max_lifetime_s: int = 86_400  # a container left behind by a killed runner exits after this long
    exec_mode: DockerExecMode = DockerExecMode.shell  # shell | exec: how each tool call reaches the container
    # The run refuses to start when the engine or these options leave a prompt's processes, memory or disk
    # unbounded (docs/docker.md#what-bounds-a-prompt): no mem_limit, read_only=false, a tmpfs without size=,
    # a writable bind in `volumes`, an engine without cgroup limits. true: run anyway, with a warning.
    allow_unbounded: bool = False


@dataclass
class PodmanSandboxOptions:
    """Where the Podman API listens; the containers themselves follow `sandbox.docker` (same options)."""

    # unix:///path/podman.sock or tcp://host:port; None: $CONTAINER_HOST, else $XDG_RUNTIME_DIR/podman/podman.sock,
    # else /run/podman/podman.sock (the first socket that exists)
    url: str | None = None


class SandboxKind(StrEnum):
    """Where tool commands run (sandbox/: one module per backend)."""

    local = "local"  # bubblewrap on this machine (sandbox/local.py)
    docker = "docker"  # one container per prompt (sandbox/docker.py)
    podman = "podman"  # the same containers on Podman, rootful or rootless (sandbox/podman.py)


@dataclass
class SandboxConfig:
    backend: SandboxKind = SandboxKind.local  # local | docker | podman
    image: str | None = None  # default image (docker, podman)
    workdir: str = "/workspace"  # default working dir inside a container
    keep: bool = False  # keep the per-task sandbox after the prompt ends
    command_timeout_s: float = 180.0  # default terminal timeout
    max_output_chars: int = 50_000  # terminal output kept (40% head, 60% tail)
    local: LocalSandboxOptions = field(default_factory=LocalSandboxOptions)
    docker: DockerSandboxOptions = field(default_factory=DockerSandboxOptions)  # containers (docker and podman)
    podman: PodmanSandboxOptions = field(default_factory=PodmanSandboxOptions)


@dataclass
class FiltersConfig:
    require_reasoning: bool = True  # discard trajectories with no reasoning in any turn
    hallucinated_tools: HallucinatedToolPolicy = HallucinatedToolPolicy.drop
    min_reward: float | None = None  # discard (reason low_reward) trajectories whose reward is below this
    # trajectories.jsonl and exports keep only the best sample of each row (highest reward; ties: lowest
    # sample_index); the other samples stay in their batch files and the ledger (docs/scoring.md)
    best_of_k: bool = False


class ScorerKind(str, Enum):
    """What judges a trajectory (docs/scoring.md)."""

    verify = "verify"  # a shell command in the prompt's own sandbox after the conversation: exit 0 = pass
    match = "match"  # the final answer against the row's `target`
    judge = "judge"  # an LLM judge with a rubric: a score in [0, 1] and an explanation
    python = "python"  # a callable `fn(entry, row) -> float | dict` named by `_target_`


class MatchMode(str, Enum):
    """How `match` compares the final answer with the target."""

    includes = "includes"  # the target appears in the answer (both case- and whitespace-normalized)
    exact = "exact"  # the answer equals the target (surrounding whitespace ignored)
    regex = "regex"  # the target is a regular expression searched in the answer
    numeric = "numeric"  # the answer's last number equals the target's within the tolerances


@dataclass
class VerifyOptions:
    # Jinja template over the row (`{{ row.field }}`, `{{ prompt }}`; `| quote` shell-quotes) used when the row
    # has no `verify` field; null: only rows with a `verify` field are verified (the others score 0, error)
    command: str | None = None
    timeout_s: float = 60.0  # the command's own limit (it runs after the conversation, before the sandbox goes)
    max_output_chars: int = 2_000  # output kept in the score record (40% head, 60% tail)
    workdir: str | None = None  # where it runs (null: the sandbox's working dir)


@dataclass
class MatchOptions:
    mode: MatchMode = MatchMode.includes
    # a regular expression whose first group (or whole match) is the answer, searched in the final answer
    # (the last match wins), e.g. "Answer: (.+)"; null: the whole final answer
    answer_pattern: str | None = None
    ignore_case: bool = True  # regex mode: case-insensitive search
    abs_tolerance: float = 1e-6  # numeric mode: |answer - target| at most this ...
    rel_tolerance: float = 0.0  # ... or at most this fraction of |target|


@dataclass
class JudgeOptions:
    # the judge's endpoint; model null: the run's own model (and its endpoint); base_url null: the run's endpoint
    endpoint: EndpointConfig = field(default_factory=lambda: EndpointConfig(temperature=0.0, max_tokens=512))
    # Jinja template of the judge's request, over `prompt`, `target`, `answer`, `conversation` (the dialogue as
    # text) and `row`; the reply must hold a JSON object {"score": 0..1, "explanation": "..."}
    rubric: str = (
        "You are grading an AI agent's answer to a task.\n\n"
        "Task:\n{{ prompt }}\n\n"
        "{% if target %}Reference answer:\n{{ target }}\n\n{% endif %}"
        "Agent's conversation:\n{{ conversation }}\n\n"
        "Agent's final answer:\n{{ answer }}\n\n"
        "Judge whether the final answer solves the task correctly. Reply with only a JSON object: "
        '{"score": <a number from 0 to 1>, "explanation": "<one or two sentences>"}'
    )
    max_conversation_chars: int = 20_000  # the dialogue shown to the judge (40% head, 60% tail)


@dataclass
class ScorerConfig:
    """One scorer of `scorers` (conf/scorer/*.yaml); the key it has there is its name in `scores`."""

    kind: ScorerKind = MISSING
    primary: bool = False  # this scorer's value is the entry's `reward` (default: the first scorer)
    pass_threshold: float = 1.0  # passed = value >= this (verify and match give 0 or 1)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    match: MatchOptions = field(default_factory=MatchOptions)
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    _target_: str | None = None  # python: dotted path of `fn(entry, row) -> float | dict` (a class: instantiated)
    args: dict[str, Any] = field(default_factory=dict)  # python: keyword arguments of the call (or of the class)


class ErrorClass(str, Enum):
    """Kinds of prompt failure an in-run retry takes (`retry.on`)."""

    provider = "provider"  # the model endpoint failed for good: an error status after model.max_retries, an empty,
    # malformed or broken reply (never EndpointDown: the endpoint serves nobody, the run stops starting prompts)
    sandbox = "sandbox"  # the sandbox could not start or died (SandboxError)
    timeout = "timeout"  # the prompt exceeded limits.timeout_s (PromptTimeout)
    tool_model = "tool_model"  # a tool's own model (vision, MoA, ...) failed and the error left the tool


@dataclass
class RetryConfig:
    """In-run retries of failed prompts (docs/evaluation.md). Each failed attempt goes to failures.jsonl; the last
    one stays the prompt's failure in the ledger, and a later invocation retries it as before (retry_failed)."""

    max_attempts: int = 1  # attempts per prompt in one invocation (1: no in-run retry)
    on: list[ErrorClass] = field(default_factory=lambda: list(ErrorClass))  # which failures are retried
    initial_wait_s: float = 1.0  # back-off before the 2nd attempt, doubled before each later one
    max_wait_s: float = 60.0  # cap of the back-off


class ExecutorKind(StrEnum):
    """What keeps the sessions in flight (executors/: one module per backend)."""

    local = "local"  # asyncio in this process
    ray = "ray"  # Ray actors, on this machine or a cluster


@dataclass
class ExecutorConfig:
    backend: ExecutorKind = ExecutorKind.local  # local (asyncio in this process) | ray
    # local: worker processes the sessions are spread over, each with its own event loop, the runner the only
    # writer of the run dir (1: all in the runner's process; null or 0: one per core). Default 1, measured:
    # docs/performance.md#worker-processes.
    processes: int | None = 1
    address: str | None = None  # ray: cluster address (None = start a local cluster)
    num_cpus: int | None = None  # ray: CPUs of a local cluster
    sessions_per_worker: int = 32  # ray: sessions multiplexed in one actor
    cpus_per_worker: float = 1.0  # ray: CPUs reserved per actor (the cluster's CPUs bound the actors)
    max_restarts: int = 4  # ray: times Ray restarts a dead actor; processes > 1: times one is replaced (-1: always)
    max_redispatch: int = 2  # ray, processes > 1: times a prompt lost with its worker is sent again before it fails


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


class CacheMode(str, Enum):
    """What the response cache does (docs/caching.md)."""

    readwrite = "readwrite"  # replay a stored reply, store every new one
    read = "read"  # replay stored replies, store nothing new
    write = "write"  # never replay: call the endpoint and store (refresh) every reply
    off = "off"  # no cache at all


@dataclass
class CacheConfig:
    """The response cache: paid model replies on disk, replayed by any run that makes the same call (docs/caching.md)."""

    mode: CacheMode = CacheMode.readwrite  # readwrite | read | write | off (or the group: cache=read)
    # where it lives, shared by every run (null: $HERMES_RUNNER_CACHE_DIR, else $XDG_CACHE_HOME/hermes-runner/responses,
    # else ~/.cache/hermes-runner/responses)
    dir: str | None = None
    size_limit: int = 4 * 2**30  # bytes on disk; beyond it the least recently stored replies are evicted
    expire: float | None = None  # seconds a stored reply is replayed (null: until evicted or cleared)


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


class UnavailablePolicy(str, Enum):
    """What to do with a toolset whose backend is not configured."""

    drop = "drop"  # leave it out of every prompt, with a warning at start
    refuse = "refuse"  # do not start the run


@dataclass
class EndpointConfig:
    """An OpenAI-compatible endpoint a tool calls (vision, image generation, MoA)."""

    model: str | None = None  # model id; null = not configured
    base_url: str | None = None  # null: the run's own model endpoint (model.base_url and its key)
    api_key_env: str | None = None  # name of the env var holding the key (used with base_url)
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass
class FetchConfig:
    """HTTP downloads made by tools (web_extract, image URLs)."""

    timeout_s: float = 20.0  # whole download, redirects included
    max_bytes: int = 10_000_000  # larger bodies are cut (a cut PDF is an error)
    max_redirects: int = 5
    user_agent: str = "Mozilla/5.0 (compatible; hermes-runner/0.1)"


@dataclass
class SearxngConfig:
    url: str | None = None  # base URL of a SearXNG instance with the JSON format enabled
    categories: str | None = None  # e.g. "general,news"
    language: str | None = None  # e.g. "en"
    safesearch: int | None = None  # 0, 1 or 2


@dataclass
class TavilyConfig:
    base_url: str = "https://api.tavily.com"
    api_key_env: str = "TAVILY_API_KEY"  # name of the env var holding the key
    search_depth: str = "basic"  # basic | advanced


class SearchKind(StrEnum):
    """Web search backends (tools/backends/search/: one module each)."""

    searxng = "searxng"  # a SearXNG instance's JSON API (tools.web.searxng.url)
    tavily = "tavily"  # the Tavily API (key in the environment)


@dataclass
class WebConfig:
    search_backend: SearchKind | None = None  # searxng | tavily | null (web toolset not configured)
    searxng: SearxngConfig = field(default_factory=SearxngConfig)
    tavily: TavilyConfig = field(default_factory=TavilyConfig)
    search_timeout_s: float = 20.0
    max_urls: int = 5  # URLs per web_extract call
    char_limit: int = 15_000  # default characters per page (head/tail view beyond)
    max_char_limit: int = 50_000  # the most a call may ask for per page
    call_char_budget: int = 90_000  # characters of all pages of one call together


@dataclass
class CodeExecutionConfig:
    python: str = "python3"  # interpreter inside the sandbox
    timeout_s: float = 60.0  # default per call
    max_timeout_s: float = 300.0  # the most a call may ask for
    max_stderr_chars: int = 10_000
    max_result_chars: int = 10_000


@dataclass
class VisionConfig:
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    max_image_bytes: int = 20_000_000


@dataclass
class ImageGenConfig:
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    sizes: dict[str, str] = field(
        default_factory=lambda: {"landscape": "1536x1024", "square": "1024x1024", "portrait": "1024x1536"}
    )
    response_format: str | None = "b64_json"  # b64_json | url | null (endpoint default)
    quality: str | None = None
    output_dir: str = "generated_images"  # inside the task's working directory


@dataclass
class MoaConfig:
    reference_models: list[EndpointConfig] = field(default_factory=list)  # asked in parallel
    aggregator: EndpointConfig = field(default_factory=EndpointConfig)  # combines their answers
    min_successful: int = 1  # reference answers needed to aggregate


@dataclass
class BrowserConfig:
    executable: str | None = None  # Chromium binary; null: chromium / chromium-browser / google-chrome on PATH
    headless: bool = True
    args: list[str] = field(default_factory=list)  # extra Chromium flags
    viewport_width: int = 1280
    viewport_height: int = 800
    navigation_timeout_s: float = 30.0
    action_timeout_s: float = 10.0
    snapshot_max_chars: int = 8_000  # compact snapshot (browser_snapshot full=false)
    full_snapshot_max_chars: int = 40_000


@dataclass
class ToolsConfig:
    unavailable: UnavailablePolicy = UnavailablePolicy.drop
    allow_private_urls: bool = False  # let tools reach loopback/private addresses (local test sites)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    web: WebConfig = field(default_factory=WebConfig)
    code_execution: CodeExecutionConfig = field(default_factory=CodeExecutionConfig)
    vision: VisionConfig = field(default_factory=VisionConfig)
    image_gen: ImageGenConfig = field(default_factory=ImageGenConfig)
    moa: MoaConfig = field(default_factory=MoaConfig)
    browser: BrowserConfig = field(default_factory=BrowserConfig)


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
    # scorers by name, each from conf/scorer/ (`+scorer@scorers.NAME=match`); every kept entry gets one
    # score record per scorer, and the primary scorer's value as `reward` (docs/scoring.md)
    scorers: dict[str, ScorerConfig] = field(default_factory=dict)
    retry: RetryConfig = field(default_factory=RetryConfig)  # in-run retries of failed prompts
    cache: CacheConfig = field(default_factory=CacheConfig)  # replayed model replies (conf/cache/: cache=off ...)

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


# The options that define a run's data, the one list of them: a resumed run must not change them silently
# (rundir/manifest.py), and a sweep job's directory is named by the overrides of these keys and of config
# groups only (rundir/sweep.py), so options that do not define the data (max_samples, num_workers, limits.*,
# executor, resume, ...) can change and the sweep resumes in the same directories.
DATA_KEYS = (
    "dataset_file", "dataset", "model.name", "model.serve.model_path", "model.temperature", "distribution", "seed", "max_turns", "max_tokens",
    "reasoning", "provider", "system_prompt", "ephemeral_system_prompt", "prefill_messages_file", "filters",
    "sandbox.backend", "sandbox.image", "shard.index", "shard.count", "output.layout", "output.final_summary",
    "max_invalid_tool_turns", "scorers",
)  # fmt: skip


# Value rules of numeric options: (dotted key, rule). A key whose value is null passes (it means "no limit"
# or "default"); `*` is each element of a list.
_POSITIVE, _NON_NEGATIVE, _AT_LEAST_1 = "> 0", ">= 0", ">= 1"
_ENDPOINT_RULES = (("timeout_s", _POSITIVE), ("max_retries", _NON_NEGATIVE), ("max_tokens", _AT_LEAST_1))
VALUE_RULES: tuple[tuple[str, str], ...] = (
    ("batch_size", _AT_LEAST_1),
    ("num_workers", _AT_LEAST_1),
    ("max_turns", _AT_LEAST_1),
    ("max_samples", _AT_LEAST_1),
    ("samples_per_prompt", _AT_LEAST_1),
    ("retry.max_attempts", _AT_LEAST_1),
    ("retry.initial_wait_s", _NON_NEGATIVE),
    ("retry.max_wait_s", _NON_NEGATIVE),
    ("max_tokens", _AT_LEAST_1),
    ("max_invalid_tool_turns", _AT_LEAST_1),
    ("log_prefix_chars", _NON_NEGATIVE),
    ("fsync_interval_s", _POSITIVE),
    ("progress_interval_s", _POSITIVE),
    ("progress_every_percent", _NON_NEGATIVE),
    ("shard.count", _AT_LEAST_1),
    ("shard.index", _NON_NEGATIVE),
    ("limits.max_cost_usd", _POSITIVE),
    ("limits.max_tokens_total", _AT_LEAST_1),
    ("limits.prompt_max_tokens", _AT_LEAST_1),
    ("limits.prompt_max_cost_usd", _POSITIVE),
    ("limits.timeout_s", _POSITIVE),
    ("cache.size_limit", _AT_LEAST_1),
    ("cache.expire", _POSITIVE),
    ("model.timeout_s", _POSITIVE),
    ("model.max_retries", _NON_NEGATIVE),
    ("model.refused_retries", _NON_NEGATIVE),
    ("model.retry_initial_wait_s", _NON_NEGATIVE),
    ("model.retry_max_wait_s", _NON_NEGATIVE),
    ("model.tool_choice_turns", _NON_NEGATIVE),
    ("model.serve.port", _NON_NEGATIVE),
    ("model.serve.startup_timeout_s", _POSITIVE),
    ("model.serve.stop_timeout_s", _NON_NEGATIVE),
    ("model.price.prompt_per_mtok", _NON_NEGATIVE),
    ("model.price.completion_per_mtok", _NON_NEGATIVE),
    ("model.price.cached_prompt_per_mtok", _NON_NEGATIVE),
    ("model.rate_limit.requests_per_minute", _POSITIVE),
    ("model.rate_limit.tokens_per_minute", _POSITIVE),
    ("model.rate_limit.min_concurrency", _AT_LEAST_1),
    ("reasoning.max_tokens", _AT_LEAST_1),
    ("sandbox.command_timeout_s", _POSITIVE),
    ("sandbox.max_output_chars", _AT_LEAST_1),
    ("sandbox.local.pids_limit", _NON_NEGATIVE),
    ("sandbox.local.cpus", _NON_NEGATIVE),
    ("sandbox.docker.cpus", _POSITIVE),
    ("sandbox.docker.pids_limit", _AT_LEAST_1),
    ("sandbox.docker.pool_size", _NON_NEGATIVE),
    ("sandbox.docker.max_lifetime_s", _AT_LEAST_1),
    ("executor.num_cpus", _AT_LEAST_1),
    ("executor.sessions_per_worker", _AT_LEAST_1),
    ("executor.cpus_per_worker", _POSITIVE),
    ("executor.max_redispatch", _NON_NEGATIVE),
    ("executor.processes", _NON_NEGATIVE),
    ("tools.fetch.timeout_s", _POSITIVE),
    ("tools.fetch.max_bytes", _AT_LEAST_1),
    ("tools.fetch.max_redirects", _NON_NEGATIVE),
    ("tools.web.search_timeout_s", _POSITIVE),
    ("tools.web.max_urls", _AT_LEAST_1),
    ("tools.web.char_limit", _AT_LEAST_1),
    ("tools.web.max_char_limit", _AT_LEAST_1),
    ("tools.web.call_char_budget", _AT_LEAST_1),
    ("tools.code_execution.timeout_s", _POSITIVE),
    ("tools.code_execution.max_timeout_s", _POSITIVE),
    ("tools.code_execution.max_stderr_chars", _NON_NEGATIVE),
    ("tools.code_execution.max_result_chars", _NON_NEGATIVE),
    ("tools.vision.max_image_bytes", _AT_LEAST_1),
    ("tools.moa.min_successful", _AT_LEAST_1),
    ("tools.browser.viewport_width", _AT_LEAST_1),
    ("tools.browser.viewport_height", _AT_LEAST_1),
    ("tools.browser.navigation_timeout_s", _POSITIVE),
    ("tools.browser.action_timeout_s", _POSITIVE),
    ("tools.browser.snapshot_max_chars", _AT_LEAST_1),
    ("tools.browser.full_snapshot_max_chars", _AT_LEAST_1),
    *((f"tools.vision.endpoint.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.image_gen.endpoint.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.moa.aggregator.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.moa.reference_models.*.{k}", r) for k, r in _ENDPOINT_RULES),
)
_TESTS = {_POSITIVE: lambda v: v > 0, _NON_NEGATIVE: lambda v: v >= 0, _AT_LEAST_1: lambda v: v >= 1}


def _values(obj: object, path: list[str], prefix: str = "") -> list[tuple[str, object, bool]]:
    """(full key, value, may be null) of a dotted path in a config object; `*` goes through a list."""
    head, rest = path[0], path[1:]
    if head == "*":
        return [v for i, item in enumerate(obj or []) for v in _values(item, rest, f"{prefix}[{i}]")]
    full = f"{prefix}.{head}" if prefix else head
    if rest:
        return _values(getattr(obj, head), rest, full)
    types = {f.name: str(f.type) for f in dataclasses.fields(obj)}
    return [(full, getattr(obj, head), "None" in types[head])]


def as_container(cfg: object) -> Any:
    """The config as plain dicts and lists (enums as their names), as OmegaConf's `to_container`
    of it would give, without the ~40 ms of building a DictConfig (a run needs it several times)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: as_container(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, Enum):
        return cfg.name
    if isinstance(cfg, DictConfig | ListConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if isinstance(cfg, dict):
        return {k: as_container(v) for k, v in cfg.items()}
    if isinstance(cfg, list | tuple):
        return [as_container(v) for v in cfg]
    return cfg


def select(container: Any, key: str) -> Any:
    """The value at a dotted key of `as_container`'s output (None where a part is missing or null)."""
    for part in key.split("."):
        if not isinstance(container, dict):
            return None
        container = container.get(part)
    return container


def run_name_problem(name: object) -> str | None:
    """Why `run_name` cannot name a run's directory under the output root (outputs/<run_name>), or None."""
    name = str(name)
    if not name.strip():
        return "run_name is empty: name the run (outputs/<run_name> is its directory)"
    if "/" in name or name in (".", "..") or any(ord(c) < 32 or c == "\x7f" for c in name):
        return (
            f"run_name {name!r} is not a plain directory name: it names outputs/<run_name>, so no /, no control "
            "characters, not . or .. (to write elsewhere, set hydra.run.dir=<path>)"
        )
    return None


def check(cfg: RunConfig) -> None:
    """Check every value rule before anything is created or started; raise ConfigError naming the keys."""
    problems = []
    for key, rule in VALUE_RULES:
        for full, value, nullable in _values(cfg, key.split(".")):
            if value is not None and not isinstance(value, bool) and not _TESTS[rule](value):
                problems.append(f"{full} must be {rule}{' (or null)' if nullable else ''}, not {value}")
    if cfg.executor.backend != ExecutorKind.local and cfg.executor.processes not in (None, 0, 1):
        problems.append(f"executor.processes={cfg.executor.processes} applies to executor=local only (Ray has actors)")
    if (why := run_name_problem(cfg.run_name)) is not None:
        problems.append(why)
    if cfg.shard.count >= 1 and cfg.shard.index >= cfg.shard.count:
        problems.append(f"shard.index must be in [0, shard.count), got {cfg.shard.index}/{cfg.shard.count}")
    problems += _template_problems(cfg.dataset.prompt_template)
    problems += check_scorers(cfg.scorers)
    if cfg.filters.min_reward is not None and not cfg.scorers:
        problems.append(
            "filters.min_reward needs a scorer (scorers is empty: add one, e.g. +scorer@scorers.match=match)"
        )
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))


def check_scorers(scorers: dict[str, ScorerConfig]) -> list[str]:
    """The problems of a `scorers` mapping (names, one primary, each kind's own options)."""
    import re

    problems = []
    if sum(s.primary for s in scorers.values()) > 1:
        names = ", ".join(n for n, s in scorers.items() if s.primary)
        problems.append(f"scorers: at most one scorer may be primary ({names} are)")
    for name, s in scorers.items():
        where = f"scorers.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            problems.append(f"{where}: a scorer's name is letters, digits, _ . - only")
        if s.kind == ScorerKind.verify:
            if s.verify.timeout_s <= 0:
                problems.append(f"{where}.verify.timeout_s must be > 0, not {s.verify.timeout_s}")
            if s.verify.max_output_chars < 0:
                problems.append(f"{where}.verify.max_output_chars must be >= 0, not {s.verify.max_output_chars}")
            problems += _template_problem(s.verify.command, f"{where}.verify.command")
        elif s.kind == ScorerKind.match:
            m = s.match
            if m.abs_tolerance < 0 or m.rel_tolerance < 0:
                problems.append(f"{where}.match: abs_tolerance and rel_tolerance must be >= 0")
            if m.answer_pattern is not None:
                try:
                    re.compile(m.answer_pattern)
                except re.error as exc:
                    problems.append(f"{where}.match.answer_pattern is not a regular expression: {exc}")
        elif s.kind == ScorerKind.judge:
            ep = s.judge.endpoint
            if ep.timeout_s <= 0 or ep.max_retries < 0 or (ep.max_tokens is not None and ep.max_tokens < 1):
                problems.append(f"{where}.judge.endpoint: timeout_s > 0, max_retries >= 0, max_tokens >= 1")
            if s.judge.max_conversation_chars < 1:
                problems.append(f"{where}.judge.max_conversation_chars must be >= 1")
            problems += _template_problem(s.judge.rubric, f"{where}.judge.rubric")
        elif s.kind == ScorerKind.python and not s._target_:
            problems.append(f"{where}._target_ must name a callable fn(entry, row) (kind python)")
    return problems


def _template_problem(text: str | None, where: str) -> list[str]:
    """[why] when `text` is not a valid template for the shared sandboxed environment (templating.py), else []."""
    from hermes_runner.templating import problems  # here: runs without a template do not pay jinja2's import

    return problems(text, where) if text else []


def _template_problems(template: str | None) -> list[str]:
    """A prompt_template that is not valid Jinja2, said with its line."""
    if template is None:
        return []
    if not template.strip():
        return ["dataset.prompt_template is empty (null: the prompt column as it is)"]
    import jinja2

    from hermes_runner.templating import environment

    try:
        environment().parse(template)
    except jinja2.TemplateSyntaxError as exc:
        return [f"dataset.prompt_template is not a valid Jinja2 template (line {exc.lineno}: {exc.message})"]
    return _template_problem(template, "dataset.prompt_template")


def closest(key: str, names: list[str]) -> str | None:
    """The valid name closest to a mistyped one (difflib, or one it begins), if any is close."""
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return close[0] if close else next((n for n in names if n.startswith(key)), None)


def check_keys(dcfg: DictConfig) -> None:
    """Refuse keys no schema defines, e.g. added with `+num_worker=8`: Hydra applies `+key=value` with the
    struct flag off (it may add any key, also to a structured config), so only this walk catches a typo.
    A top-level `hydra` node (in a callback's config) is Hydra's own."""
    unknown = []

    def walk(node: DictConfig | ListConfig, prefix: str) -> None:
        if isinstance(node, ListConfig):
            for i in range(len(node)):
                child = node._get_node(i)
                if isinstance(child, (DictConfig, ListConfig)):
                    walk(child, f"{prefix}[{i}]")
            return
        schema = OmegaConf.get_type(node)
        names = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else None
        for key in node:
            full = f"{prefix}.{key}" if prefix else str(key)
            if full == "hydra":
                continue
            if names is not None and key not in names:
                close = closest(str(key), names)
                where = f"in {prefix}" if prefix else "at the top level"
                unknown.append(f"{full} (no such option {where}" + (f"; did you mean {close}?)" if close else ")"))
                continue
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)):
                walk(child, full)

    walk(dcfg, "")
    if unknown:
        raise ConfigError("unknown option: " + ", ".join(unknown))


def register_configs() -> None:
    """Register schemas so YAML options in each group are validated against them."""
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="provider", name="provider_schema", node=ProviderConfig)
    cs.store(group="reasoning", name="reasoning_schema", node=ReasoningConfig)
    cs.store(group="distribution", name="distribution_schema", node=DistributionConfig)
    cs.store(group="sandbox", name="sandbox_schema", node=SandboxConfig)
    cs.store(group="executor", name="executor_schema", node=ExecutorConfig)
    cs.store(group="tools", name="tools_schema", node=ToolsConfig)
    cs.store(group="filters", name="filters_schema", node=FiltersConfig)
    cs.store(group="scorer", name="scorer_schema", node=ScorerConfig)
    cs.store(group="cache", name="cache_schema", node=CacheConfig)
