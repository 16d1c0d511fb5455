"""An external agent program (`agent.kind=external`) in the prompt's own sandbox, its model calls answered by the
recording model proxy (model/proxy.py) through the run's model path; the trajectory is rebuilt from the calls.

In the sandbox, a small bridge (BRIDGE, run by the program's Python) listens on a loopback port of the sandbox's
own network namespace and forwards to the prompt's proxy socket in its /tmp: OPENAI_BASE_URL points there, with
the prompt's token as OPENAI_API_KEY. The sandbox has no other network (docs/agents.md)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.agent.install import Install
from hermes_runner.agent.loop import (
    AgentSettings,
    Clock,
    SessionResult,
    StopReason,
    budget_note,
    count_reply,
    over_budget,
)
from hermes_runner.config import AgentConfig
from hermes_runner.config.templating import compile_template, render
from hermes_runner.errors import AgentFailed, PromptTimeout, Refused, SandboxError
from hermes_runner.model.base import ChatModel, Completion
from hermes_runner.model.client import parse_completion
from hermes_runner.model.proxy import SOCKET, ModelProxy
from hermes_runner.scorers.base import row_of
from hermes_runner.tools.base import ToolContext
from hermes_runner.util.text import clip

log = logging.getLogger(__name__)

BRIDGE_FILE, PORT_FILE = ".hermes-bridge.py", ".hermes-port"
# argv: the proxy's socket, the file the chosen port is written to. Forwards each TCP connection to the socket.
BRIDGE = """import asyncio, os, sys
SOCK, PORT = sys.argv[1], sys.argv[2]
async def pipe(src, dst):
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except OSError:
        pass
    finally:
        try:
            dst.write_eof()
        except OSError:
            pass
async def serve(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(SOCK)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    up_writer.close()
    writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    with open(PORT + ".tmp", "w") as fp:
        fp.write(str(server.sockets[0].getsockname()[1]))
    os.rename(PORT + ".tmp", PORT)
    await server.serve_forever()
asyncio.run(main())
"""
NO_BRIDGE = 198  # the launcher's exit code when the bridge did not start


@dataclass
class Offered:
    """A tool schema the program sent (its trajectory's system turn lists them)."""

    schema: dict

    def openai_schema(self) -> dict:
        return self.schema


@dataclass
class Recording:
    """One prompt's calls through the proxy, and why the proxy stopped answering (if it did)."""

    calls: list[tuple[dict, Completion]] = field(default_factory=list)  # (request body, reply)
    stopped: StopReason | None = None
    error: BaseException | None = None  # a model call that failed: the prompt fails with it
    in_flight: set[asyncio.Task] = field(default_factory=set)  # calls being answered (cancelled when the program ends)


class ExternalAgent:
    """Runs `agent.command` in the prompt's sandbox (an AgentBackend)."""

    own_tools = False

    def __init__(self, model: ChatModel, proxy: ModelProxy, cfg: AgentConfig, install: Install,
                 settings: AgentSettings, model_name: str, share: tuple[str, str] | None = None):  # fmt: skip
        self.model, self.proxy, self.cfg, self.install = model, proxy, cfg, install
        self.share = share  # containers: the run's proxy dir (on this host, in the container)
        self.s, self.model_name = settings, model_name
        self.label = f"{cfg.name} {install.version}".strip()
        self.template = compile_template(cfg.command or "", "agent.command")

    async def run(self, res: SessionResult, ctx: ToolContext) -> SessionResult:
        started = time.monotonic()
        sandbox = ctx.sandbox
        host_dir, sock_dir, box_dir, name = self._where(sandbox)
        rec, clock, context = Recording(), Clock(res), contextvars.copy_context()

        async def serve(body: dict) -> Completion:  # in the session's context: its cache scope
            task = asyncio.get_running_loop().create_task(self._serve(res, rec, clock, body), context=context)
            rec.in_flight.add(task)
            task.add_done_callback(rec.in_flight.discard)
            return await task

        route = await self.proxy.open(host_dir, serve, self.model_name, name)
        try:
            await sandbox.write_file(f"{box_dir}/{BRIDGE_FILE}", BRIDGE.encode())
            script = self._script(res, box_dir, f"{sock_dir}/{name}", route.token)
            out = await sandbox.run(script, timeout=self.cfg.timeout_s)
        except asyncio.CancelledError:  # limits.timeout_s: the conversation of its last call is kept (session.py)
            if rec.calls:
                rebuild(res, *rec.calls[-1], None)
            raise
        finally:
            for task in list(rec.in_flight):  # a call the program no longer waits for (it ended, or was stopped)
                task.cancel()
            await self.proxy.close(route)
            res.duration_s = time.monotonic() - started
        log.debug("[P%d] agent exited %d: %s", res.prompt.index, out.exit_code, clip(out.output, 2000))
        if rec.error is not None:
            raise rec.error
        if out.timed_out:
            raise PromptTimeout(f"the agent program ran over agent.timeout_s={self.cfg.timeout_s:g}s")
        if out.exit_code == NO_BRIDGE:
            raise SandboxError(f"the model bridge did not start in the sandbox: {clip(out.output, 1000)}")
        if not rec.calls:
            raise AgentFailed(f"the agent program made no model call (exit {out.exit_code}): {clip(out.output, 1500)}")
        if out.exit_code and rec.stopped is None:
            raise AgentFailed(f"the agent program exited {out.exit_code}: {clip(out.output, 1500)}")
        rebuild(res, *rec.calls[-1], rec.stopped)
        return res

    async def _serve(self, res: SessionResult, rec: Recording, clock: Clock, body: dict) -> Completion:
        """One call of the program: refused past max_turns or the prompt's budget, else the run's model's reply."""
        if rec.error is not None:
            raise Refused(f"hermes-runner: an earlier model call failed ({rec.error})", 502)
        stop = StopReason.max_turns if len(rec.calls) >= self.s.max_turns else over_budget(res, self.s)
        if stop is not None:
            rec.stopped = rec.stopped or stop
            raise Refused(f"hermes-runner: this prompt's {stop.value} was reached; no more model calls", 400)
        start = clock.now()
        try:
            messages = body["messages"]  # with limits.tell_agent, the budget note after them (sent, never recorded)
            if self.s.tell_agent:
                messages = [*messages, budget_note(res, self.s, len(rec.calls))]
            reply = await self.model.complete(messages, body.get("tools") or [])
        except Exception as exc:
            clock.model(start, None, exc)
            rec.error = exc
            raise
        clock.model(start, reply)
        count_reply(res, reply)
        rec.calls.append((body, reply))
        return reply

    def _where(self, sandbox: object) -> tuple[Path, str, str, str]:
        """(the socket's dir on this host, that dir in the sandbox, a writable dir in the sandbox, the socket's name):
        the local sandbox's /tmp, or a container's bind of the run's proxy dir (`share`), one socket per prompt."""
        if (shared := getattr(sandbox, "shared_dir", None)) is not None:
            host_dir, box_dir = shared()
            return host_dir, box_dir, box_dir, SOCKET
        if self.share is None:
            raise SandboxError(f"agent.kind=external cannot reach the model from {type(sandbox).__name__}")
        return Path(self.share[0]), self.share[1], "/tmp", f"{secrets.token_hex(8)}.sock"

    def _script(self, res: SessionResult, box_dir: str, sock: str, token: str) -> str:
        """The launcher: the bridge, the proxy's variables, the program's own, its command."""
        values = {"prompt": res.prompt.prompt, "row": row_of(res.prompt), "model": self.model_name}
        command = render(self.template, "agent.command", values)
        bin_dir, python = self.install.bin_dir, shlex.quote(self.install.python)
        d = shlex.quote(box_dir)
        env = {**self.cfg.env, "OPENAI_API_KEY": token}
        exports = "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in env.items())
        path = f'export PATH={shlex.quote(bin_dir)}:"$PATH"\n' if bin_dir else ""
        return f"""[ -x {python} ] || command -v {python} >/dev/null || {{ echo "no python for the bridge" >&2; exit {NO_BRIDGE}; }}
{python} {d}/{BRIDGE_FILE} {shlex.quote(sock)} {d}/{PORT_FILE} </dev/null >/dev/null 2>&1 &
__hr_bridge=$!
for __hr_i in $(seq 600); do [ -s {d}/{PORT_FILE} ] && break; kill -0 $__hr_bridge 2>/dev/null || break; sleep 0.05; done
[ -s {d}/{PORT_FILE} ] || {{ echo "the model bridge did not start" >&2; exit {NO_BRIDGE}; }}
__hr_url=http://127.0.0.1:$(cat {d}/{PORT_FILE})/v1
export OPENAI_BASE_URL=$__hr_url OPENAI_API_BASE=$__hr_url
{path}{exports}( {command}
)
__hr_rc=$?
kill $__hr_bridge 2>/dev/null
exit $__hr_rc
"""  # noqa: E501


def _text(content: object) -> str:
    """A message's content as text (the text parts of a list of parts)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _message(msg: dict, names: dict[str, str]) -> dict:
    """A message as the program sent it, in the history's form (tool results named by their calls)."""
    role = msg.get("role")
    if role == "assistant":
        reply = parse_completion({"choices": [{"message": msg, "finish_reason": None}]}).message
        for call in reply.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
        return reply
    if role == "tool":
        call_id = str(msg.get("tool_call_id") or "")
        return {"role": "tool", "tool_call_id": call_id, "name": msg.get("name") or names.get(call_id, ""),
                "content": _text(msg.get("content"))}  # fmt: skip
    return {"role": "user", "content": _text(msg.get("content"))}


def rebuild(res: SessionResult, body: dict, reply: Completion, stopped: StopReason | None) -> None:
    """The conversation of the last call: its messages (the system prompt apart) and its reply; the tools it
    offered, the tool calls it made (ok: a tool result answered the call), why it ended (the program exited 0, or
    the proxy stopped answering: `stopped`)."""
    names: dict[str, str] = {}
    system = [_text(m.get("content")) for m in body["messages"] if m.get("role") in ("system", "developer")]
    res.system_prompt = "\n\n".join(system)
    res.history = [_message(m, names) for m in body["messages"] if m.get("role") not in ("system", "developer")]
    res.history.append(reply.message)
    res.tools = [Offered(t) for t in body.get("tools") or () if isinstance(t, dict)]
    res.external = True
    answered = {m["tool_call_id"] for m in res.history if m["role"] == "tool"}
    res.tool_calls = [
        (c["function"]["name"], c["id"] in answered)
        for m in res.history[:-1]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or ()
    ]
    if stopped is not None:
        res.stop_reason = stopped
    elif reply.finish_reason == "length":
        res.stop_reason = StopReason.length
    else:  # the program ended on its own, exit 0: it says it is done (mini-swe-agent's last reply calls its submit)
        res.stop_reason = StopReason.final_answer
