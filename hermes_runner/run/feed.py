"""feed=atropos: the run as an Atropos environment. It registers with the API server once the trainer has, holds
new prompts while the trainer's queue is full (back-pressure), and pushes each row's samples_per_prompt scored
samples as one group (`scored_group`) once the last of them is recorded.

Exactly once across a kill: the Atropos server keeps no group ids, so it cannot drop a repeat. feed.jsonl records
an `intent` (with the group's digest) before each push and `pushed` after the server acknowledged it; pushes go
one at a time, so a kill leaves at most one intent unacknowledged. The next invocation compares that group with
the server's `/latest_example` (the last group it queued): the same digest means it arrived (recorded `pushed`,
not sent again), else it is pushed. The one window left: another environment pushed to the same server between
that push and the kill (its group is then the latest), and the group is pushed a second time (docs/training.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from pathlib import Path

import aiohttp

from hermes_runner.agent.loop import SessionResult
from hermes_runner.agent.session import Outcome
from hermes_runner.config import FeedConfig, FeedKind
from hermes_runner.errors import FeedError
from hermes_runner.rundir.layout import FEED
from hermes_runner.rundir.reader import RunData
from hermes_runner.rundir.store import iter_lines
from hermes_runner.trajectory.tokens import training_row
from hermes_runner.util import fastjson

log = logging.getLogger(__name__)

MASKED_LOGPROB = 1.0  # Atropos' inference_logprobs value where the mask is -100 (an impossible logprob)
JSON_HEADERS = {"Content-Type": "application/json"}
Sample = tuple[list[dict], float]  # (the sample's token turns, its reward)


def scored_group(samples: list[Sample]) -> dict:
    """Atropos' ScoredData of one row's samples: tokens (the final sequence), masks (-100 outside the sampled
    tokens, else the token id: the labels), scores (the rewards) and inference_logprobs (1.0 where masked)."""
    group: dict[str, list] = {"tokens": [], "masks": [], "scores": [], "inference_logprobs": []}
    for turns, reward in samples:
        row = training_row(turns)
        group["tokens"].append(row["input_ids"])
        group["masks"].append(row["labels"])
        group["scores"].append(float(reward))
        lps = zip(row["logprobs"], row["loss_mask"], strict=True)
        group["inference_logprobs"].append([lp if m else MASKED_LOGPROB for lp, m in lps])
    return group


def digest(group: dict) -> str:
    """What identifies a pushed group: its tokens and scores."""
    return hashlib.sha256(json.dumps([group.get("tokens"), group.get("scores")]).encode()).hexdigest()[:32]


class FeedLog:
    """feed.jsonl: per group (a row key) its intent before the push, `pushed` or `skipped` after; fsynced."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / FEED
        self.done: set[str] = set()  # pushed or skipped
        self.pending: dict[str, str] = {}  # an intent not acknowledged: group -> its digest
        for line in iter_lines(self.path) if self.path.exists() else ():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            if rec.get("state") == "intent":
                self.pending[rec["group"]] = rec["digest"]
            else:
                self.done.add(rec["group"])
                self.pending.pop(rec["group"], None)

    def write(self, group: str, state: str, **extra: object) -> None:
        with self.path.open("a") as fp:
            fp.write(json.dumps({"group": group, "state": state, **extra}) + "\n")
            fp.flush()
            os.fsync(fp.fileno())
        if state == "intent":
            self.pending[group] = str(extra["digest"])
        else:
            self.done.add(group)
            self.pending.pop(group, None)


class AtroposFeed:
    """The Atropos environment of one invocation: `start`, `wait_room` before each prompt, `finished` after each
    record, `close`."""

    def __init__(self, cfg: FeedConfig, run_dir: Path, group_size: int, scored: bool):
        self.cfg, self.dir, self.group_size = cfg, run_dir, group_size
        if not scored:
            log.warning("feed: the run has no scorer: every score pushed is 0.0 (add one, e.g. scorer=match)")
        self.log = FeedLog(run_dir)
        self.rows: dict[str, dict[int, Sample]] = {}  # rows not pushed: sample -> (turns, reward)
        self.http: aiohttp.ClientSession | None = None
        self.env_id = -1
        self.batch_size = 0  # the trainer's, in sequences
        self.max_len = cfg.max_token_len
        self.holding = False
        self._asked, self._queued = float("-inf"), 0  # when /status-env was last asked; its queue + our pushes since
        self._room, self._push = asyncio.Lock(), asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()  # pushes in progress (one at a time, under _push)
        self._error: BaseException | None = None  # a push that failed

    async def _call(self, method: str, path: str, body: object = None) -> dict:
        """One request; a server not (yet) listening is retried for feed.connect_timeout_s (nothing was sent)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.connect_timeout_s
        while True:
            try:
                data = None if body is None else fastjson.dumps(body)
                url = self.cfg.url.rstrip("/") + path
                async with self.http.request(method, url, data=data, headers=JSON_HEADERS) as r:
                    if r.status >= 400:
                        raise FeedError(f"Atropos API server {self.cfg.url}: {method} {path}: HTTP {r.status}: "
                                        f"{(await r.text())[:300]}")  # fmt: skip
                    return fastjson.loads(await r.read())
            except aiohttp.ClientConnectorError as exc:
                if loop.time() > deadline:
                    raise FeedError(
                        f"no Atropos API server answers at {self.cfg.url} ({exc.strerror or exc}) after "
                        f"{self.cfg.connect_timeout_s:g}s: start it (`run-api --port PORT`) or set feed.url"
                    ) from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise FeedError(f"Atropos API server {self.cfg.url}: {method} {path}: {exc!r}") from None
            await asyncio.sleep(self.cfg.poll_interval_s)

    async def start(self) -> None:
        """Register once the trainer has, then settle what an earlier invocation left: the unacknowledged push,
        and the recorded rows whose group was never pushed."""
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        body = {"max_token_length": self.cfg.max_token_len, "desired_name": self.cfg.env_name,
                "weight": self.cfg.weight, "group_size": self.group_size}  # fmt: skip
        said = False
        while (reg := await self._call("POST", "/register-env", body)).get("status") != "success":
            if not said:
                log.info("feed: waiting for a trainer at %s (%s)", self.cfg.url, reg.get("status"))
                said = True
            await asyncio.sleep(self.cfg.poll_interval_s)
        self.env_id = int(reg["env_id"])
        info = await self._call("GET", "/info")
        self.batch_size = int(info["batch_size"])
        if int(info.get("max_token_len", -1)) > 0:
            self.max_len = min(self.max_len, int(info["max_token_len"]))
        log.info("feed: Atropos environment %s (env_id %d), trainer batch %d", reg.get("wandb_name"), self.env_id,
                 self.batch_size)  # fmt: skip
        self._load_recorded()
        await self._reconcile()
        for row in list(self.rows):
            await self._push_if_complete(row)

    def _load_recorded(self) -> None:
        """The finished samples an earlier invocation recorded, of the rows not pushed."""
        data = RunData.load(self.dir)
        keys = [
            k for k, r in data.final.items() if r["status"] != "failed" and (r.get("row") or k) not in self.log.done
        ]
        tokens = data.tokens(keys)
        for key in keys:
            rec = data.final[key]
            turns = (tokens.get(key) or {}).get("turns") or []
            self.rows.setdefault(rec.get("row") or key, {})[int(rec.get("sample", 0))] = (turns, rec.get("reward", 0.0))

    async def _reconcile(self) -> None:
        """An intent without its acknowledgement: pushed if the server's latest group is that group."""
        for row, want in list(self.log.pending.items()):
            latest = await self._call("GET", "/latest_example")
            if latest.get("tokens") and digest(latest) == want:
                log.info("feed: the group of %s reached the server before the last run stopped: not pushed again", row)
                self.log.write(row, "pushed", env_id=latest.get("env_id"), reconciled=True)
                self.rows.pop(row, None)

    async def wait_room(self) -> None:
        """Return once the server's queue holds fewer than feed.max_batches_offpolicy trainer batches. An answer of
        /status-env is reused for feed.poll_interval_s, counting the groups pushed since (the queue only shrinks
        by the trainer's pulls), so prompts starting together cost one request."""
        loop = asyncio.get_running_loop()
        async with self._room:
            while True:
                if loop.time() - self._asked > self.cfg.poll_interval_s:
                    st = await self._call("GET", "/status-env", {"env_id": self.env_id})
                    self._asked, self._queued = loop.time(), int(st["queue_size"])
                if self._queued * self.group_size < self.cfg.max_batches_offpolicy * self.batch_size:
                    if self.holding:
                        log.info("feed: the trainer took a batch: new prompts start again")
                    self.holding = False
                    return
                if not self.holding:
                    log.info("feed: holding new prompts: the trainer's queue is full (%d groups)", self._queued)
                    self.holding = True
                await asyncio.sleep(self.cfg.poll_interval_s)

    async def finished(self, outcome: Outcome, status: str) -> None:
        """A sample was recorded: its row's group is pushed once its last sample is in (a failed one runs again)."""
        if status == "failed" or not isinstance(outcome, SessionResult):
            return
        p = outcome.prompt
        row = p.row_key or p.key
        if self._error is not None:
            raise self._error
        if row not in self.log.done:
            self.rows.setdefault(row, {})[p.sample] = (outcome.tokens, outcome.reward)
            if len(self.rows[row]) >= self.group_size:  # pushed beside the run: recording goes on meanwhile
                task = asyncio.ensure_future(self._push_if_complete(row))
                self._tasks.add(task)
                task.add_done_callback(self._pushed)

    def _pushed(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()  # raised by the next finished() or by close()

    async def _push_if_complete(self, row: str) -> None:
        samples = self.rows.get(row, {})
        if len(samples) < self.group_size:
            return
        del self.rows[row]
        if not all(turns for turns, _ in samples.values()):
            log.warning("feed: a sample of %s has no token ids (the endpoint returned none): not pushed", row)
            return self.log.write(row, "skipped", why="no token ids")
        group = scored_group([samples[i] for i in sorted(samples)])
        longest = max(len(t) for t in group["tokens"])
        if longest > self.max_len:
            log.warning("feed: the group of %s has %d tokens, over max_token_len %d: not pushed", row, longest,
                        self.max_len)  # fmt: skip
            return self.log.write(row, "skipped", why=f"{longest} tokens > {self.max_len}")
        async with self._push:
            self.log.write(row, "intent", digest=digest(group))
            await self._call("POST", "/scored_data", {**group, "env_id": self.env_id})
            self.log.write(row, "pushed", env_id=self.env_id)
            self._queued += 1

    async def close(self) -> None:
        """Finish the pushes in progress, then disconnect; a push that failed is raised (a rerun pushes it)."""
        if self.http is None:
            return
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self.env_id >= 0 and self._error is None:
                await self._call("POST", "/disconnect-env", {"env_id": self.env_id})
        except FeedError as exc:
            log.warning("feed: %s", exc)
        finally:
            await self.http.close()
        if self._error is not None:
            raise self._error


def open_feed(cfg: FeedConfig, run_dir: Path, samples_per_prompt: int, scored: bool) -> AtroposFeed | None:
    """The invocation's feed (None for feed=none); `scored`: the run has a scorer."""
    return AtroposFeed(cfg, run_dir, samples_per_prompt, scored) if cfg.kind == FeedKind.atropos else None
