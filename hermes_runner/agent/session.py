"""One prompt, start to end: toolsets, sandbox, agent loop, cleanup; errors become Failures."""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, wait_exponential

from hermes_runner.agent.base import AgentBackend
from hermes_runner.agent.loop import Agent, AgentSettings, SessionResult, StopReason, stopped_at_timeout
from hermes_runner.config import DistributionConfig, ErrorClass, OutputLayout, RetryConfig, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import (
    BrokenStream,
    EmptyResponse,
    EndpointDown,
    ImageUnavailable,
    MalformedReply,
    ModelCallError,
    PromptTimeout,
    SandboxError,
    ToolModelError,
)
from hermes_runner.model.base import ChatModel
from hermes_runner.model.cache import CALL_SCOPE, CallScope
from hermes_runner.sandbox.base import Sandbox, SandboxBackend
from hermes_runner.scorers import Job, Scorers, reward_of, row_of
from hermes_runner.telemetry import Span, Trace, genai
from hermes_runner.tools import distributions
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import stats_names, tools_for
from hermes_runner.trajectory import entry as entries
from hermes_runner.usage import Usage


@dataclass
class Failure:
    prompt: Prompt
    error_type: str
    error: str
    traceback: str = ""
    toolsets: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    retries: int = 0
    cache_hits: int = 0  # calls the response cache answered (SessionResult.cache_hits)
    saved: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    timeline: list[dict] = field(default_factory=list)  # the calls made before it failed (SessionResult.timeline)
    error_class: ErrorClass | None = None  # what kind of failure, for retry.on (None: never retried in-run)
    status: int | None = None  # a model call's HTTP status that failed the prompt (ModelCallError), if any
    attempt: int = 1  # which in-run attempt of the prompt failed so
    earlier_failures: list[Failure] = field(default_factory=list)  # failed in-run attempts before this one


Outcome = SessionResult | Failure


@dataclass
class SessionSpec:
    """What a prompt's session takes of the config: its sections and the few run values it needs."""

    sandbox: SandboxConfig
    distribution: DistributionConfig
    retry: RetryConfig = field(default_factory=RetryConfig)
    layout: OutputLayout = OutputLayout.hermes  # output.layout of the entry
    model_name: str = ""  # model.name: the entry's model when the replies name none
    seed: int = 0  # of the toolset draw
    timeout_s: float | None = None  # limits.timeout_s


def error_class(exc: BaseException) -> ErrorClass | None:
    """The retry.on class of a prompt's error; None for errors a new attempt cannot mend (bad input, endpoint down)."""
    if isinstance(exc, EndpointDown):
        return None  # the endpoint serves no prompt: the run stops starting them
    if isinstance(exc, ToolModelError):
        return ErrorClass.tool_model
    if isinstance(exc, ModelCallError | EmptyResponse | MalformedReply | BrokenStream):
        return ErrorClass.provider
    if isinstance(exc, SandboxError):
        return ErrorClass.sandbox
    if isinstance(exc, PromptTimeout):
        return ErrorClass.timeout
    return None


class SessionRunner:
    """Runs prompts with shared, long-lived parts (model client, sandbox backend)."""

    def __init__(
        self,
        model: ChatModel,
        backend: SandboxBackend,
        settings: AgentSettings,
        spec: SessionSpec,
        unavailable_images: dict[str, str] | None = None,
        services: dict | None = None,
        unavailable_toolsets: Collection[str] = (),
        scorers: Scorers | None = None,
        trace: Trace | None = None,
        agent: AgentBackend | None = None,
        agent_tools: Collection[str] = (),
    ):
        self.spec, self.system_prompt = spec, settings.system_prompt
        self.trace = trace or Trace()
        self.agent: AgentBackend = agent or Agent(model, settings, self.trace)
        self.backend = backend
        self.unavailable = unavailable_images or {}
        self.services = services or {}
        self.unavailable_toolsets = frozenset(unavailable_toolsets)  # dropped: never offered
        self.scorers = scorers or Scorers({}, [])
        own = set(spec.distribution.toolsets) - self.unavailable_toolsets
        # tool_stats keys: the run's tools, or the names an external program's tools are counted by
        self.fill = stats_names(own) if self.agent.own_tools else sorted(set(agent_tools))
        # entered around each prompt's session: batch mode counts the sessions in flight with it (model/batch.py)
        self.around: Callable[[], AbstractContextManager] = contextlib.nullcontext

    async def __call__(self, prompt: Prompt) -> Outcome:
        """Run the prompt, its session one trace (telemetry: an invoke_agent span, its calls below)."""
        attrs = genai.session(prompt.key, prompt.index, prompt.sample, self.spec.model_name)
        with self.trace.span(f"invoke_agent {genai.AGENT}", attrs) as span, self.around():
            outcome = await self._attempts(prompt)
            _traced(span, outcome)
            return outcome

    async def _attempts(self, prompt: Prompt) -> Outcome:
        """Run the prompt, again after a back-off while it fails in a way `retry.on` names (up to
        `retry.max_attempts`; a conversation stopped at limits.timeout_s is class `timeout`, kept if it is the
        last attempt); the failures before the last outcome ride on it (`earlier_failures`)."""
        retry = self.spec.retry
        earlier: list[Failure] = []

        def retried(o: Outcome) -> bool:
            if isinstance(o, Failure):
                return o.error_class in retry.on
            return o.stop_reason == StopReason.timeout and ErrorClass.timeout in retry.on

        def keep(state: RetryCallState) -> None:
            failed = state.outcome.result()
            if isinstance(failed, SessionResult):  # stopped at limits.timeout_s and retried: a failed attempt
                failed = self._failure(failed, self._timed_out(failed), failed.deadline - self.spec.timeout_s)
            failed.attempt = len(earlier) + 1
            earlier.append(failed)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(retry.max_attempts),
            wait=wait_exponential(multiplier=retry.initial_wait_s, max=retry.max_wait_s),
            retry=retry_if_result(retried),
            before_sleep=keep,
            retry_error_callback=lambda state: state.outcome.result(),
        )
        outcome = await retrying(self._once, prompt)
        outcome.earlier_failures = earlier
        if isinstance(outcome, Failure):
            outcome.attempt = len(earlier) + 1
        for f in earlier:  # the prompt's spend is that of all its attempts (the ledger and the budget count it)
            outcome.usage.add(f.usage)
            outcome.api_calls += f.api_calls
            outcome.retries += f.retries
            outcome.cache_hits += f.cache_hits
            outcome.saved.add(f.saved)
        if isinstance(outcome, SessionResult):
            entries.count(outcome.entry, outcome)  # the spend of every attempt and of the scorers' models
        return outcome

    async def _once(self, prompt: Prompt) -> Outcome:
        started = time.monotonic()
        CALL_SCOPE.set(CallScope(prompt.sample))  # this attempt's calls: their sample index, identical ones counted
        spec = self.spec
        toolsets = []  # an external program brings its own tools (its trajectory lists those it offered)
        if self.agent.own_tools:
            toolsets = distributions.sample(spec.distribution, spec.seed, prompt.key, self.unavailable_toolsets)
        res = SessionResult(prompt, tools_for(toolsets), toolsets)
        res.deadline = None if spec.timeout_s is None else started + spec.timeout_s
        try:
            return await self._run(res)
        except Exception as exc:  # noqa: BLE001 - every error of one prompt is recorded, the run goes on
            return self._failure(res, exc, started)

    async def _run(self, res: SessionResult) -> SessionResult:
        prompt = res.prompt
        box = self.spec.sandbox
        image = prompt.image or box.image
        if image and image in self.unavailable:
            raise ImageUnavailable(f"image {image!r} is not available: {self.unavailable[image]}")
        sandbox = self.trace.sandbox(await self._create(prompt, res.deadline))
        ctx = ToolContext(
            sandbox,
            command_timeout_s=box.command_timeout_s,
            max_output_chars=box.max_output_chars,
            services=self.services,
            usage=res.usage,
        )
        try:
            await self._converse(res, ctx)
            res.entry = entries.entry(  # once, here: the scorers judge it, the runner writes it (batch, reason)
                res,
                batch_num=-1,
                model=res.model or self.spec.model_name,
                tool_names=self.fill,
                system_prompt=self.system_prompt if res.system_prompt is None else res.system_prompt,
                layout=self.spec.layout,
                agent=self.agent.label,
            )
            if self.scorers:
                await self._score(res, sandbox)  # before the sandbox goes: verify looks at what the agent left
            return res
        finally:
            await asyncio.shield(_close_task(ctx, sandbox))

    async def _create(self, prompt: Prompt, deadline: float | None) -> Sandbox:
        """The prompt's sandbox, started within limits.timeout_s (else the prompt fails: nothing was said yet)."""
        limit, started = _until(deadline), time.monotonic()
        try:
            async with limit:
                return await self.backend.create(prompt)
        except TimeoutError:
            if not limit.expired():
                raise
            raise PromptTimeout(  # the SDK's cancellation traceback says nothing: the limit and where it hit does
                f"prompt exceeded limits.timeout_s={self.spec.timeout_s:g}s before its sandbox started "
                f"(waited {time.monotonic() - started:.1f}s for it)"
            ) from None

    async def _converse(self, res: SessionResult, ctx: ToolContext) -> None:
        """The agent's conversation; at limits.timeout_s it is cancelled and kept as it was (stop_reason timeout),
        to be scored in its still-open sandbox like any other."""
        limit = _until(res.deadline)
        try:
            async with limit:
                await self.agent.run(res, ctx)
        except TimeoutError:
            if not limit.expired():  # raised inside, not the deadline's cancellation
                raise
            stopped_at_timeout(res)

    async def _score(self, res: SessionResult, sandbox: Sandbox) -> None:
        """Every scorer's record (the primary's first) and the reward; the judge's spend goes to res.usage."""
        scores = await self.scorers.score(Job(res.entry, row_of(res.prompt), sandbox, res.usage), self.trace)
        res.scores = res.entry["scores"] = self.scorers.ordered(scores)
        res.reward = reward_of(res.scores, self.scorers.primary)
        res.entry["reward"] = float(res.reward)

    def _timed_out(self, res: SessionResult) -> PromptTimeout:
        return PromptTimeout(
            f"prompt exceeded limits.timeout_s={self.spec.timeout_s:g}s "
            f"(stopped after {res.duration_s:.1f}s of conversation, {res.api_calls} model calls)"
        )

    @staticmethod
    def _failure(res: SessionResult, err: BaseException, started: float) -> Failure:
        return Failure(
            prompt=res.prompt,
            error_type=type(err).__name__,
            error=str(err) or type(err).__name__,
            traceback="".join(traceback.format_exception(err))[-4000:],
            toolsets=res.toolsets,
            usage=res.usage,
            api_calls=res.api_calls,
            retries=res.retries,
            cache_hits=res.cache_hits,
            saved=res.saved,
            duration_s=time.monotonic() - started,
            timeline=res.timeline,
            error_class=error_class(err),
            status=err.status if isinstance(err, ModelCallError) else None,
        )


def _traced(span: Span, outcome: Outcome) -> None:
    """The session span's end: the prompt's usage and cost (all its attempts), how it ended."""
    span.set({**genai.usage(outcome.usage), "hermes.api_calls": outcome.api_calls, "hermes.retries": outcome.retries,
              "hermes.cache_hits": outcome.cache_hits, "hermes.attempts": len(outcome.earlier_failures) + 1})  # fmt: skip
    if isinstance(outcome, Failure):
        span.fail(outcome.error_type, outcome.error)
        return
    span.set({"hermes.stop_reason": str(outcome.stop_reason), "hermes.tool_calls": len(outcome.tool_calls),
              "hermes.reward": float(outcome.reward)})  # fmt: skip
    if outcome.model:
        span.set({genai.RESPONSE_MODEL: outcome.model})


def _until(deadline: float | None) -> asyncio.Timeout:
    """A timeout at `deadline` (time.monotonic, the event loop's clock), or none."""
    return asyncio.timeout(None if deadline is None else max(0.0, deadline - time.monotonic()))


async def _close_task(ctx: ToolContext, sandbox) -> None:
    """Task-scoped tool state first (e.g. its browser context), then the sandbox."""
    try:
        await ctx.aclose()
    finally:
        await sandbox.close()
