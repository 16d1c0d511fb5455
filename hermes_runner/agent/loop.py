"""The agent loop: call the model, run the tools it asks for, until an answer or max_turns."""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum

from hermes_runner import __version__
from hermes_runner.dataset import Prompt, system_text
from hermes_runner.errors import ModelCallError, ToolError, ToolModelError
from hermes_runner.model.base import ChatModel, Completion
from hermes_runner.model.note import note
from hermes_runner.telemetry import Trace, genai
from hermes_runner.tools.base import Tool, ToolContext, ToolResult
from hermes_runner.usage import Usage

log = logging.getLogger(__name__)

# Sent (never saved) with the tool-less call that gives a conversation stopped by max_turns its last
# assistant turn, as the original runner's max-iterations summary does.
SUMMARY_REQUEST = (
    "You have reached the maximum number of tool-calling turns. No more tools can be called. "
    "Give your final answer now, based on what you found so far."
)


@dataclass
class AgentSettings:
    max_turns: int = 10
    system_prompt: str = ""
    ephemeral_system_prompt: str | None = None  # sent, never saved
    prefill_messages: list[dict] = field(default_factory=list)  # sent after the system prompt, never saved
    max_invalid_tool_turns: int = 3  # consecutive turns with only invalid calls before giving up
    max_tokens: int | None = None  # per-prompt token budget: the conversation stops (partial) when spent
    max_cost_usd: float | None = None  # per-prompt cost budget, same
    final_summary: bool = True  # max_turns after tool results: one more call, without tools, for a last answer
    tell_agent: bool = False  # limits.tell_agent: each call carries what is left (model/note.py), sent only
    keep_note: bool = False  # limits.keep_note: the notes stay in the history where they were sent
    verbose: bool = False
    log_prefix_chars: int = 100


class StopReason(StrEnum):
    """Why a conversation ended; the value is what the data records (`stop` in the ledger, `stop_reason`)."""

    final_answer = "final_answer"  # a reply without tool calls: completed
    length = "length"  # output cut by the length limit: partial
    invalid_tool_calls = "invalid_tool_calls"  # max_invalid_tool_turns rounds of invalid calls: partial
    token_limit = "token_limit"  # limits.prompt_max_tokens reached: partial
    cost_limit = "cost_limit"  # limits.prompt_max_cost_usd reached: partial
    timeout = "timeout"  # limits.timeout_s reached: cancelled, the conversation so far kept: partial
    max_turns = "max_turns"  # max_turns calls, still calling tools: stopped (neither completed nor partial)

    @property
    def completed(self) -> bool:
        return self is StopReason.final_answer

    @property
    def partial(self) -> bool:
        return self in _PARTIAL

    @property
    def at_limit(self) -> bool:
        """Stopped by one of the prompt's limits (counted in pass@k as limits.at_limit says)."""
        return self in _AT_LIMIT


_PARTIAL = frozenset(
    {
        StopReason.length,
        StopReason.invalid_tool_calls,
        StopReason.token_limit,
        StopReason.cost_limit,
        StopReason.timeout,
    }
)
_AT_LIMIT = frozenset({StopReason.max_turns, StopReason.token_limit, StopReason.cost_limit, StopReason.timeout})


@dataclass
class SessionResult:
    prompt: Prompt
    tools: list[Tool]  # the tools the model was offered
    toolsets: list[str]
    history: list[dict] = field(default_factory=list)  # user, assistant and tool messages
    api_calls: int = 0
    stop_reason: StopReason | str = ""  # "" until the conversation ends
    tool_calls: list[tuple[str, bool]] = field(default_factory=list)  # (tool name, ok) in call order
    usage: Usage = field(default_factory=Usage)  # what its calls cost (replies replayed from the cache: `saved`)
    retries: int = 0
    cache_hits: int = 0  # calls answered by the response cache (model/cache.py): not in api_calls, nothing spent
    saved: Usage = field(default_factory=Usage)  # the usage those replies had when they were paid
    model: str = ""  # the model that answered the last call, as its reply says ("" when replies do not say)
    duration_s: float = 0.0
    scores: list[dict] = field(default_factory=list)  # one record per scorer, the primary's first (score/)
    reward: float = 0.0  # the primary scorer's value (0.0 unscored)
    entry: dict | None = None  # its trajectory entry, built once by the session (trajectory/entry.py)
    # Every model and tool call in order, for the report's timeline (rundir TIMELINE): model calls
    # {k: "model", t, dur, in, out, retries, finish}, tool calls {k: "tool", n, t, dur, ok, exit};
    # t: seconds from the prompt's start.
    timeline: list[dict] = field(default_factory=list)
    earlier_failures: list = field(default_factory=list)  # failed in-run attempts before this one (session.Failure)
    # output.tokens: per assistant turn whose reply carried token ids, {turn (its ordinal among the history's
    # assistant messages), finish,
    # prompt_ids, completion_ids, logprobs} (the run's tokens/ sidecar, rundir/tokens.py)
    tokens: list[dict] = field(default_factory=list)
    system_prompt: str | None = None  # the system prompt an external program sent (None: the run's)
    external: bool = False  # driven by an external program (agent/external.py): `tools` are those it offered
    deadline: float | None = None  # limits.timeout_s: when the prompt's time is up (time.monotonic)

    @property
    def completed(self) -> bool:
        """Ended with a final answer."""
        return isinstance(self.stop_reason, StopReason) and self.stop_reason.completed

    @property
    def partial(self) -> bool:
        """Stopped early: output cut by length, repeated invalid calls, or the prompt's token, cost or time limit."""
        return isinstance(self.stop_reason, StopReason) and self.stop_reason.partial

    @property
    def at_limit(self) -> bool:
        """Stopped by one of the prompt's limits: max_turns, tokens, cost or time."""
        return isinstance(self.stop_reason, StopReason) and self.stop_reason.at_limit


_EXIT = re.compile(r'"exit_code": (-?\d+)')


class Clock:
    """Times the calls of one conversation into its timeline."""

    def __init__(self, res: SessionResult):
        self.res, self.t0 = res, time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def model(self, start: float, reply: Completion | None, error: BaseException | None = None) -> None:
        call: dict = {"k": "model", "t": round(start, 3), "dur": round(self.now() - start, 3)}
        if reply is not None:
            u = reply.usage
            call.update(
                {"in": u.prompt_tokens, "out": u.completion_tokens, "retries": reply.retries,
                 "finish": reply.finish_reason or ""}
            )  # fmt: skip
            if reply.cached:
                call["cached"] = True
        else:
            call["error"] = type(error).__name__ if error else "cancelled"
        self.res.timeline.append(call)

    def tool(self, start: float, name: str, result: ToolResult) -> None:
        m = _EXIT.search(result.content[:200]) or _EXIT.search(result.content[-200:])
        call = {"k": "tool", "n": name, "t": round(start, 3), "dur": round(self.now() - start, 3), "ok": result.ok}
        if m:
            call["exit"] = int(m.group(1))
        self.res.timeline.append(call)


def _keep_tokens(res: SessionResult, reply: Completion) -> None:
    """The reply's token ids, for the assistant turn just appended to the history (output.tokens)."""
    if reply.tokens is not None:
        turn = sum(m["role"] == "assistant" for m in res.history) - 1
        res.tokens.append({"turn": turn, "finish": reply.finish_reason, **reply.tokens.as_dict()})


def count_reply(res: SessionResult, reply: Completion) -> None:
    """What one answered call adds to the session: the call, its retries and usage, the model that answered
    (a reply replayed from the cache: a hit and its saved usage)."""
    if reply.cached:
        res.cache_hits += 1
        res.saved.add(reply.usage)
    else:
        res.api_calls += 1
        res.retries += reply.retries
        res.usage.add(reply.usage)
    res.model = reply.model or res.model


def over_budget(res: SessionResult, s: AgentSettings) -> StopReason | None:
    """The prompt's own limits, over its whole conversation (replayed replies too: a replay stops where the
    paid run stopped)."""
    tokens, cost = res.usage.total_tokens + res.saved.total_tokens, res.usage.cost_usd + res.saved.cost_usd
    if s.max_tokens is not None and tokens >= s.max_tokens:
        return StopReason.token_limit
    if s.max_cost_usd is not None and cost >= s.max_cost_usd:
        return StopReason.cost_limit
    return None


def budget_note(res: SessionResult, s: AgentSettings, turn: int) -> dict:
    """The limits.tell_agent note of call `turn` (0-based): what is left of the limits that are set."""
    seconds = None if res.deadline is None else res.deadline - time.monotonic()
    tokens, cost = res.usage.total_tokens + res.saved.total_tokens, res.usage.cost_usd + res.saved.cost_usd
    return note(
        s.max_turns - turn,
        seconds,
        None if s.max_tokens is None else s.max_tokens - tokens,
        None if s.max_cost_usd is None else s.max_cost_usd - cost,
    )


def stopped_at_timeout(res: SessionResult) -> None:
    """A conversation cancelled at limits.timeout_s: kept as it was, ending on an assistant turn (the last round's
    tool results trimmed, as for the other stops; one cancelled in its first call keeps its prompt only)."""
    res.stop_reason = StopReason.timeout
    if not res.history:
        res.history = res.prompt.opening()
    while len(res.history) > 1 and res.history[-1]["role"] in ("tool", "system"):  # (system: a kept budget note)
        res.history.pop()


class Agent:
    """The built-in loop (an AgentBackend): the run's tools and system prompt."""

    label = f"hermes-runner {__version__}"
    own_tools = True

    def __init__(self, model: ChatModel, settings: AgentSettings, trace: Trace | None = None):
        self.model = model
        self.s = settings
        self.trace = trace or Trace()  # each tool call a span (the model's calls: the model is traced itself)

    def _head(self, prompt: Prompt) -> list[dict]:
        system = system_text(self.s.system_prompt, prompt)  # the run's, then the row's own (an `input` list's)
        if self.s.ephemeral_system_prompt:
            system = f"{system}\n\n{self.s.ephemeral_system_prompt}" if system else self.s.ephemeral_system_prompt
        head = [{"role": "system", "content": system}] if system else []
        return head + list(self.s.prefill_messages)

    async def run(self, res: SessionResult, ctx: ToolContext) -> SessionResult:
        """Drive one conversation, filling `res` as it goes (so a failure keeps what was spent)."""
        started = time.monotonic()
        prompt, tools = res.prompt, res.tools
        res.history = prompt.opening()  # the prompt, or the row's opening messages
        offered = {t.name: t for t in tools}
        schemas = [t.openai_schema() for t in tools]
        head = self._head(prompt)
        invalid_streak = 0
        clock = Clock(res)
        try:
            for turn in range(self.s.max_turns):
                reply = await self._complete(clock, head + self._told(res, turn), schemas)
                count_reply(res, reply)
                msg = reply.message
                res.history.append(msg)
                _keep_tokens(res, reply)
                if reply.finish_reason == "length":
                    res.stop_reason = StopReason.length
                    break
                calls = msg.get("tool_calls")
                if not calls:
                    res.stop_reason = StopReason.final_answer
                    break
                if over := self._over_budget(res):
                    res.stop_reason = over
                    break
                any_valid = False
                for call in calls:
                    start = clock.now()
                    name, result, valid = await self._call(call, offered, ctx)
                    clock.tool(start, name, result)
                    any_valid |= valid
                    res.tool_calls.append((name, result.ok))
                    res.history.append(
                        {"role": "tool", "tool_call_id": call["id"], "name": name, "content": result.content}
                    )
                    self._log(prompt, f"{name} -> {'ok' if result.ok else 'error'}: {result.content}")
                invalid_streak = 0 if any_valid else invalid_streak + 1
                if invalid_streak >= self.s.max_invalid_tool_turns:
                    res.stop_reason = StopReason.invalid_tool_calls
                    break
            else:
                res.stop_reason = StopReason.max_turns
            if res.history[-1]["role"] == "tool":
                await self._end_on_assistant(res, head, clock)
        finally:
            res.duration_s = time.monotonic() - started
        return res

    async def _complete(self, clock: Clock, messages: list[dict], schemas: list[dict]) -> Completion:
        """One model call, timed into the timeline (a failed one too)."""
        start = clock.now()
        try:
            reply = await self.model.complete(messages, schemas)
        except BaseException as exc:
            clock.model(start, None, exc)
            raise
        clock.model(start, reply)
        return reply

    async def _end_on_assistant(self, res: SessionResult, head: list[dict], clock: Clock) -> None:
        """A conversation that stopped right after tool results gets a last assistant turn, so that every
        trainer keeps it: for max_turns (with `final_summary`), the reply to one call without tools (any
        tool call it still makes is dropped); otherwise, or if that call fails or says nothing, the last
        round's tool results are trimmed and the row ends on the assistant turn that made the calls.
        The stop reason stays what it was."""
        if self.s.final_summary and res.stop_reason == StopReason.max_turns:
            try:
                reply = await self._complete(
                    clock, [*head, *res.history, {"role": "user", "content": SUMMARY_REQUEST}], []
                )
            except Exception as exc:  # noqa: BLE001 - the trajectory is kept either way, trimmed
                log.warning("[P%d] final summary call failed (%s): trimming instead", res.prompt.index, exc)
            else:
                count_reply(res, reply)
                msg = {k: v for k, v in reply.message.items() if k != "tool_calls"}
                if (msg.get("content") or "").strip():
                    res.history.append(msg)
                    _keep_tokens(res, reply)
                    return
        while res.history and res.history[-1]["role"] == "tool":
            res.history.pop()

    def _told(self, res: SessionResult, turn: int) -> list[dict]:
        """The conversation as sent: with limits.tell_agent, the budget note after it (kept in the history with
        limits.keep_note, else sent only)."""
        if not self.s.tell_agent:
            return res.history
        if self.s.keep_note:
            res.history.append(budget_note(res, self.s, turn))
            return res.history
        return [*res.history, budget_note(res, self.s, turn)]

    def _over_budget(self, res: SessionResult) -> StopReason | None:
        return over_budget(res, self.s)

    async def _call(self, call: dict, offered: dict[str, Tool], ctx: ToolContext) -> tuple[str, ToolResult, bool]:
        """Run one tool call as an execute_tool span (its sandbox commands below it)."""
        attrs = genai.tool(call)
        with self.trace.span(f"execute_tool {attrs[genai.TOOL_NAME]}", attrs) as span:
            span.set(self.trace.content(genai.TOOL_ARGUMENTS, str(call["function"].get("arguments") or "")))
            name, result, valid = await self._run_tool(call, offered, ctx)
            span.set(self.trace.content(genai.TOOL_RESULT, result.content))
            if not result.ok:
                span.fail("tool_error" if valid else "invalid_tool_call")
            return name, result, valid

    async def _run_tool(self, call: dict, offered: dict[str, Tool], ctx: ToolContext) -> tuple[str, ToolResult, bool]:
        """Run one tool call; invalid calls get an error result back (and count as failures)."""
        name = call["function"]["name"]
        tool = offered.get(name)
        if tool is None:
            avail = ", ".join(sorted(offered)) or "none"
            return name, ToolResult.error(f"Tool '{name}' is not available. Available tools: {avail}"), False
        raw = call["function"]["arguments"] or "{}"
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as exc:
            return name, ToolResult.error(f"Arguments are not valid JSON ({exc.msg} at char {exc.pos})"), False
        if not isinstance(args, dict):
            return name, ToolResult.error("Arguments must be a JSON object"), False
        try:
            return name, await tool.run(ctx, args), True
        except ToolError as exc:
            return name, ToolResult.error(str(exc)), True
        except ModelCallError as exc:  # only tools' models are called from here: the prompt fails, as a tool's
            if isinstance(exc, ToolModelError):
                raise
            raise ToolModelError(f"tool {name}: its model failed: {exc}", exc.status) from exc

    def _log(self, prompt: Prompt, text: str) -> None:
        if self.s.verbose:
            n = self.s.log_prefix_chars
            log.info("[P%d] %s", prompt.index, text if len(text) <= n else text[:n] + "...")
