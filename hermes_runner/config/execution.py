"""How the prompts are executed: the executor, the shard, the limits, in-run retries, the response cache."""

from dataclasses import dataclass, field
from enum import Enum, StrEnum


class ExecutorKind(StrEnum):
    """What keeps the sessions in flight (executors/: one module per backend)."""

    local = "local"  # asyncio in this process
    ray = "ray"  # Ray actors, on this machine or a cluster


@dataclass
class ExecutorConfig:
    backend: str = "local"  # local (asyncio in this process) | ray, or an executor of yours: "package.module:f"
    # local: worker processes the sessions are spread over, each with its own event loop, the runner the only
    # writer of the run dir (1: all in the runner's process; null or 0: one per core). Default 1, measured:
    # docs/performance.md#worker-processes.
    processes: int | None = 1
    address: str | None = None  # ray: a cluster, "auto" or "ray://head:10001" (None: start a local cluster)
    num_cpus: int | None = None  # ray: CPUs of a local cluster (None: all of this machine's)
    sessions_per_worker: int = 32  # ray: sessions multiplexed in one actor (actors = ceil(num_workers / this))
    cpus_per_worker: float = 1.0  # ray: CPUs reserved per actor, where its sandbox commands run (bound the actors)
    max_restarts: int = 4  # ray: times Ray restarts a dead actor; processes > 1: times one is replaced (-1: always)
    max_redispatch: int = 2  # ray, processes > 1: times a prompt lost with its worker is sent again before it fails
    RULES = {"backend": ExecutorKind, "num_cpus": ">= 1", "sessions_per_worker": ">= 1", "cpus_per_worker": "> 0",
             "max_redispatch": ">= 0", "processes": ">= 0"}  # fmt: skip

    def problems(self, where: str) -> list[str]:
        if self.backend != ExecutorKind.local and self.processes not in (None, 0, 1):
            return [f"{where}.processes={self.processes} applies to {where}=local only (Ray has actors)"]
        return []


@dataclass
class ShardConfig:
    index: int = 0
    count: int = 1
    RULES = {"count": ">= 1", "index": ">= 0"}

    def problems(self, where: str) -> list[str]:
        if self.count >= 1 and self.index >= self.count:
            return [f"{where}.index must be in [0, {where}.count), got {self.index}/{self.count}"]
        return []


class AtLimit(str, Enum):
    """How a prompt answered at a limit (max_turns, limits.timeout_s, prompt_max_tokens, prompt_max_cost_usd) counts
    in pass@k and the score statistics (docs/evaluation.md#prompts-at-a-limit)."""

    scored = "scored"  # as its scorers say
    fail = "fail"  # as a failed sample (value 0), whatever its scorers say
    drop = "drop"  # not at all (left out like an unscored prompt; its row is still kept)


@dataclass
class LimitsConfig:
    max_cost_usd: float | None = None  # run budget
    max_tokens_total: int | None = None  # run token budget
    prompt_max_tokens: int | None = None  # per-prompt token budget
    prompt_max_cost_usd: float | None = None  # per-prompt cost budget
    # per-prompt wall clock: the conversation is stopped and kept (stop_reason timeout), then scored
    timeout_s: float | None = None
    # each model call carries what is left of the prompt's limits (turns, seconds, tokens, cost: those set) in a
    # system note after the conversation, sent only (docs/evaluation.md#telling-the-agent-its-budget)
    tell_agent: bool = False
    keep_note: bool = False  # tell_agent: keep each note in the saved conversation where it was sent
    at_limit: AtLimit = AtLimit.scored  # how a prompt stopped by a limit counts in pass@k: scored | fail | drop
    RULES = {"max_cost_usd": "> 0", "max_tokens_total": ">= 1", "prompt_max_tokens": ">= 1",
             "prompt_max_cost_usd": "> 0", "timeout_s": "> 0"}  # fmt: skip

    def problems(self, where: str) -> list[str]:
        if self.keep_note and not self.tell_agent:
            return [f"{where}.keep_note=true keeps the budget notes of {where}.tell_agent, which is false"]
        return []


class ErrorClass(str, Enum):
    """Kinds of prompt failure an in-run retry takes (`retry.on`)."""

    provider = "provider"  # the model endpoint failed for good: an error status after model.max_retries, an empty,
    # malformed or broken reply (never EndpointDown: the endpoint serves nobody, the run stops starting prompts)
    sandbox = "sandbox"  # the sandbox could not start or died (SandboxError)
    # the prompt exceeded limits.timeout_s (PromptTimeout; the last attempt's conversation is kept, stop_reason
    # timeout), or an external program ran over agent.timeout_s
    timeout = "timeout"
    tool_model = "tool_model"  # a tool's own model (vision, MoA, ...) failed and the error left the tool


@dataclass
class RetryConfig:
    """In-run retries of failed prompts (docs/evaluation.md). Each failed attempt goes to failures.jsonl; the last
    one stays the prompt's failure in the ledger, and a later invocation retries it as before (retry_failed)."""

    max_attempts: int = 1  # attempts per prompt in one invocation (1: no in-run retry)
    on: list[ErrorClass] = field(default_factory=lambda: list(ErrorClass))  # which failures are retried
    initial_wait_s: float = 1.0  # back-off before the 2nd attempt, doubled before each later one
    max_wait_s: float = 60.0  # cap of the back-off
    RULES = {"max_attempts": ">= 1", "initial_wait_s": ">= 0", "max_wait_s": ">= 0"}


class BreakerClass(StrEnum):
    """Kinds of error the circuit breaker counts (`breaker.on`): a spike of one pauses the dispatch of prompts."""

    # the model endpoint answers 5xx or 429, or refuses connections after it has answered a call (a server gone
    # mid-run), or a prompt fails with a provider error
    provider = "provider"
    sandbox = "sandbox"  # a prompt's sandbox could not start (SandboxError before its first model call)
    scorer = "scorer"  # a scorer could not judge a trajectory (a score record with an error)


@dataclass
class BreakerConfig:
    """The circuit breaker (docs/evaluation.md#circuit-breaker): when `threshold` prompts meet errors of one class
    within `window_s`, no new prompt starts; the runner probes every `probe_s` (a 1-token model call for provider,
    one trial prompt for the others) and resumes once a probe succeeds (or, for provider, any model call is
    answered). Prompts that fail with that class while it
    is open run again in the same invocation (one ledger record each)."""

    enabled: bool = True
    on: list[BreakerClass] = field(default_factory=lambda: list(BreakerClass))  # the classes it counts
    window_s: float = 60.0  # the sliding window errors are counted over
    threshold: int = 20  # distinct prompts meeting errors of one class in the window that open it, ...
    share: float = 0.5  # ... or this share of num_workers if fewer (but at least 3 prompts)
    probe_s: float = 10.0  # seconds between probes while open
    # open this long: the run gives up (no new prompt starts, exit 4; the prompts held fail, a rerun retries them)
    give_up_s: float | None = 3600.0
    # a session with no model call starting or ending for this long is reported (progress line, log warning) with
    # where it waits: the model call in flight, the tool and its command, ... (null: never)
    silent_after_s: float | None = 600.0
    RULES = {
        "window_s": "> 0",
        "threshold": ">= 1",
        "share": "> 0",
        "probe_s": "> 0",
        "give_up_s": "> 0",
        "silent_after_s": "> 0",
    }


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
    RULES = {"size_limit": ">= 1", "expire": "> 0"}
