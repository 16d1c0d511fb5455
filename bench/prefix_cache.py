"""Prompt-prefix reuse of the embedded model's server: prompt tokens evaluated and seconds, cache off and on.

    python -m bench.prefix_cache              # 6 sample prompts, two sessions interleaved, off/on/off/on
    python -m bench.prefix_cache --prompts 10 --rounds 1

What `make run` sends the embedded SmolLM2 server (model=smollm2, +experiment=quickstart): the agent's
system prompt and the schemas of the terminal and file tools, a sample prompt, and after the forced tool call its result.
Two sessions are in flight (num_workers=2), so their calls alternate: A1 B1 A2 B2 ... The server is started
as the runner starts it (conf/model/gguf.yaml's command), once as it is (no prompt cache) and once with
llama-cpp-python's prompt cache (`--cache true`). llama.cpp keeps the tokens of the last call in its KV
cache, so the shared system prompt + tools prefix is reused either way; what the prompt cache adds is the
state of each session's previous call, so a session's own history is not evaluated again after the other
session's call. Figures: prompt tokens sent (usage.prompt_tokens) and evaluated (the server's
`llama_perf_context_print: prompt eval time` lines), seconds per prompt and the server's CPU seconds per prompt (less
sensitive than wall time to other work on a shared machine); rounds alternate off and on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from bench.common import ROOT, compose

EVAL_LINE = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def _request(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as resp:
        return json.load(resp)


def server_argv(cfg, cache: bool, port: int) -> list[str]:
    """The embedded model's server command as the runner builds it (model=smollm2), with the cache on or off."""
    from hermes_runner.model.serve import server_argv as product_argv

    argv = product_argv(cfg.model, port)
    if "--cache" in argv:
        argv[argv.index("--cache") + 1] = "true" if cache else "false"
    else:
        argv += ["--cache", "true" if cache else "false"]
    return argv


def agent_prefix(cfg) -> tuple[str, list[dict]]:
    """(system prompt, the offered tools) of the quickstart agent (all the toolsets of its distribution)."""
    from hermes_runner.tools import catalog

    return cfg.system_prompt, [t.openai_schema() for t in catalog.tools_for(list(cfg.distribution.toolsets))]


def run_round(cache: bool, prompts: list[str], work: Path) -> dict:
    from hermes_runner.model.serve import free_port

    port = free_port()
    cfg = compose(["+experiment=quickstart"])
    argv = server_argv(cfg, cache, port)
    system, tools = agent_prefix(cfg)
    log = work / f"server-{'on' if cache else 'off'}-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                urllib.request.urlopen(base + "/models", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"server did not start: {log}") from None
                time.sleep(0.5)
        sent = 0
        start = time.monotonic()
        for a, b in zip(prompts[::2], prompts[1::2], strict=False):
            sessions = [[{"role": "system", "content": system}, {"role": "user", "content": p}] for p in (a, b)]
            for turn in range(2):  # the forced tool call, then the turn after its result
                for messages in sessions:
                    body = {
                        "model": "m",
                        "messages": messages,
                        "tools": tools,
                        "tool_choice": "required" if turn == 0 else "auto",
                        "max_tokens": cfg.max_tokens,
                        "temperature": cfg.model.temperature,
                        **dict(cfg.model.extra_body or {}),
                    }
                    reply = _request(base + "/chat/completions", body)
                    sent += reply["usage"]["prompt_tokens"]
                    msg = reply["choices"][0]["message"]
                    messages.append({k: v for k, v in msg.items() if v is not None})
                    for call in msg.get("tool_calls") or []:
                        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "done (exit 0)"})
        seconds = time.monotonic() - start
        t = psutil.Process(proc.pid).cpu_times()
        cpu = t.user + t.system
    finally:
        proc.terminate()
        proc.wait(30)
    evaluated = [int(n) for n in EVAL_LINE.findall(log.read_text(errors="replace"))]
    n = len(prompts) // 2 * 2
    return {
        "cache": cache,
        "prompts": n,
        "calls": 2 * n,
        "sent": sent,
        "evaluated": sum(evaluated),
        "first_call_evaluated": evaluated[0] if evaluated else 0,
        "seconds": seconds,
        "s_per_prompt": seconds / n,
        "server_cpu_s_per_prompt": cpu / n,  # (start-up included: loading the model)
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=6, help="sample prompts (data/sample_prompts.jsonl), even")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (off, on), interleaved")
    args = ap.parse_args()
    rows = [json.loads(line) for line in (ROOT / "data" / "sample_prompts.jsonl").read_text().splitlines() if line]
    prompts = [r["prompt"] for r in rows][: args.prompts]
    results = []
    with tempfile.TemporaryDirectory(prefix="prefix-cache-") as tmp:
        for _ in range(args.rounds):
            for cache in (False, True):
                r = run_round(cache, prompts, Path(tmp))
                results.append(r)
                print(json.dumps(r), flush=True)
    print("\ncache  prompts  calls  tokens sent  evaluated  (first call)  s/prompt  server CPU s/prompt")
    for r in results:
        print(
            f"{'on' if r['cache'] else 'off':<6} {r['prompts']:>7} {r['calls']:>6} {r['sent']:>12,} {r['evaluated']:>10,}"
            f" {r['first_call_evaluated']:>13,} {r['s_per_prompt']:>9.2f} {r['server_cpu_s_per_prompt']:>20.2f}"
        )
    for cache in (False, True):
        mine = [r for r in results if r["cache"] == cache]
        print(
            f"cache {'on ' if cache else 'off'}: median {statistics.median(r['s_per_prompt'] for r in mine):.2f} s/prompt,"
            f" {statistics.median(r['server_cpu_s_per_prompt'] for r in mine):.2f} server CPU s/prompt,"
            f" {statistics.median(r['evaluated'] for r in mine):,.0f} prompt tokens evaluated"
        )


if __name__ == "__main__":
    main()
