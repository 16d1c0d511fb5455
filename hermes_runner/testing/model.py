"""An in-process `ChatModel` whose replies follow the `#script` grammar (hermes_runner.testing.script).

It answers as the HTTP scripted server does, read through the OpenAI client, minus the wire: the same
step gives the same message, finish reason and token counts. Differences, by design: no retries (each
entry of a step's ``fail`` list fails one `complete` call with `ModelCallError`, its status attached),
no streaming (``midstream`` fails the call like any other error), a bad ``#script`` line raises
`ScriptSyntaxError`. Use it to test the agent loop, the session and the record logic in milliseconds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_runner.config import PriceConfig
from hermes_runner.errors import ModelCallError
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.testing import script
from hermes_runner.usage import Usage, fill_cost


@dataclass
class Call:
    """One `complete` call as the model received it."""

    messages: list[dict]
    tools: list[dict]
    prompt: str  # the first user message (where a script is read from)
    turn: int  # assistant messages so far: which step answers


class ScriptedModel:
    """`ChatModel` in process. `steps` script every conversation (else each prompt's `#script` line is read).

    `hooks` meter the calls as they meter the client's (`CallHook`: before each call, after it ends);
    `price` fills the cost of replies that report none, as `model.price` does; `name` is the model that answers.
    """

    def __init__(
        self,
        steps: list[dict] | None = None,
        *,
        hooks: Sequence[CallHook] = (),
        price: PriceConfig | None = None,
        name: str = "scripted",
    ):
        self.steps = steps
        self.hooks = list(hooks)
        self.price = price or PriceConfig()
        self.name = name
        self.calls: list[Call] = []
        self.attempts: Counter[str] = Counter()
        self.closed = False
        self._ids = itertools.count()

    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion:
        call = Call(list(messages), list(tools), script.first_user(messages), script.turn_of(messages))
        self.calls.append(call)
        estimate = sum(len(str(m.get("content") or "")) for m in messages) / 4 + 1
        for h in self.hooks:
            await h.before_call(estimate)
        try:
            completion = await self._answer(call)
        except BaseException as exc:
            for h in self.hooks:
                h.after_call(exc, None)
            raise
        fill_cost(completion.usage, self.price)  # before the meters see it
        for h in self.hooks:
            h.after_call(None, completion)
        return completion

    async def _answer(self, call: Call) -> Completion:
        step = script.step_for(call.messages, call.tools, self.steps)
        key = script.attempt_key(call.prompt, call.turn)
        attempt, self.attempts[key] = self.attempts[key], self.attempts[key] + 1
        fail = script.failure(step, attempt)
        if fail is not None:
            if fail.get("hang"):
                await asyncio.sleep(fail["hang"])
            raise ModelCallError(fail.get("message", f"scripted error {fail['status']}"), fail["status"])
        if step.get("sleep"):
            await asyncio.sleep(step["sleep"])
        step = script.offered(step, call.tools)
        n = next(self._ids)
        usage = script.usage(step, call.messages, script.wire_message(step, n))
        return Completion(
            script.message(step, n),
            script.finish_reason(step),
            Usage.from_openai(usage),
            model=step.get("model") or self.name,
        )

    async def aclose(self) -> None:
        self.closed = True
