"""The feed section: scored groups of rollouts pushed live to an RL trainer (docs/training.md)."""

from dataclasses import dataclass
from enum import Enum


class FeedKind(str, Enum):
    none = "none"  # no feed: the run writes its files only
    atropos = "atropos"  # the run is an Atropos environment: it pushes each row's scored group to the API server


@dataclass
class FeedConfig:
    """`feed=atropos`: the runner registers with Atropos' API server (`run-api`) as an environment, and once all
    `samples_per_prompt` samples of a row are recorded it pushes them as one group (tokens, masks, scores,
    inference_logprobs), holding new prompts while the trainer's queue is full. It sets output.tokens=true; without a scorer
    every score is 0.0."""

    kind: FeedKind = FeedKind.none
    url: str = "http://localhost:8000"  # the Atropos API server (`run-api --port 8000`)
    env_name: str = "hermes-runner"  # the environment's desired_name (the server appends _<n>)
    weight: float = 1.0  # the environment's weight in the trainer's batches
    # register-env's max_token_length; a group with a longer sequence is not pushed (feed.jsonl says so)
    max_token_len: int = 8192
    # hold new prompts while the server's queue of this environment's groups holds this many trainer batches
    # (Atropos' max_batches_offpolicy: queue_size * group_size >= max_batches_offpolicy * batch_size)
    max_batches_offpolicy: int = 1
    poll_interval_s: float = 1.0  # how often register-env (the trainer not there yet) and status-env are asked
    connect_timeout_s: float = 60.0  # how long an unreachable server is retried before the run stops
    RULES = {"max_token_len": ">= 1", "max_batches_offpolicy": ">= 1", "poll_interval_s": "> 0",
             "connect_timeout_s": "> 0", "weight": "> 0"}  # fmt: skip

    def problems(self, where: str) -> list[str]:
        if self.kind != FeedKind.none and not self.url.startswith(("http://", "https://")):
            return [f"{where}.url must be an http:// or https:// URL of the Atropos API server, not {self.url!r}"]
        return []
