"""The response cache: what its key covers, hits that make no call and cost nothing, errors never kept, and a
cache that is corrupt, full or tiny turning into misses, never into a failure."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import diskcache
import pytest

from hermes_runner.commands import cache as cache_command
from hermes_runner.config import CacheConfig, CacheMode, LimitsConfig, ModelConfig, ProviderConfig, ReasoningConfig
from hermes_runner.errors import ModelCallError
from hermes_runner.model import cache as rc
from hermes_runner.model.cache import CALL_SCOPE, CachedModel, CallScope, ResponseCache, endpoint_identity, fingerprint
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.model.note import note
from hermes_runner.run.budget import RunBudget
from hermes_runner.testing.model import ScriptedModel
from hermes_runner.usage import Usage

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is 2+2?"}]
TOOLS = [{"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}]


VARIANTS = {
    "base": {},
    "messages": {"messages": [*MESSAGES, {"role": "user", "content": "and 3+3?"}]},
    "tools": {"tools": []},
    "sample": {"sample": 1},
    "model": {"name": "other-model"},
    "temperature": {"temperature": 0.7},
    "extra_body": {"extra_body": {"top_p": 0.9}},
    "endpoint": {"base_url": "http://other.example:8000/v1"},
    "tool_choice": {"tool_choice": "required"},
    # the API key, the headers, the stream flag and the URL's spelling do not change the reply:
    "key_and_headers": {"key": "sk-two", "default_headers": {"X-Secret": "s3cr3t"}},
    "stream": {"stream": True},
    "url_spelling": {"base_url": "http://host.example:8000/v1"},
}
SAME_AS_BASE = {"key_and_headers", "stream", "url_spelling"}


async def key_of(monkeypatch, messages=MESSAGES, tools=TOOLS, sample=0, key="sk-one", **model_values) -> str:
    """The key the run's model would give this call (a real client's request body; no call is made)."""
    monkeypatch.setenv("HR_UNIT_KEY", key)
    values = {"name": "m", "base_url": "http://Host.example:8000/v1/", "api_key_env": "HR_UNIT_KEY"} | model_values
    mc = ModelConfig(**values)
    client = OpenAIChatModel(mc, ProviderConfig(), ReasoningConfig(), max_tokens=64)
    try:
        return fingerprint(endpoint_identity(mc), client.request_body(messages, tools), 0, sample, 0)
    finally:
        await client.aclose()


def test_the_key_covers_what_determines_the_reply_and_nothing_else(monkeypatch):
    async def keys() -> dict[str, str]:
        return {name: await key_of(monkeypatch, **values) for name, values in VARIANTS.items()}

    keys = asyncio.run(keys())
    assert keys["base"] == asyncio.run(key_of(monkeypatch))  # stable
    differ = [k for n, k in keys.items() if n not in SAME_AS_BASE]
    assert len(set(differ)) == len(differ)
    assert {keys[n] for n in SAME_AS_BASE} == {keys["base"]}


def test_a_served_model_is_known_by_its_weights_not_its_port():
    mc = ModelConfig(name="m", base_url="served")
    mc.serve.enabled, mc.serve.model_path = True, "pkg:x/model.gguf"
    assert endpoint_identity(mc) == "served:pkg:x/model.gguf"


def cached(tmp_path: Path, steps=None, mode=CacheMode.readwrite, **values):
    """A ScriptedModel metered by a run budget, behind a cache in tmp_path."""
    budget = RunBudget(LimitsConfig(), Usage())
    inner = ScriptedModel(steps, hooks=[budget])
    store = ResponseCache(CacheConfig(mode=mode, dir=str(tmp_path / "cache"), **values))
    body = lambda messages, tools: {"messages": messages, "tools": tools}  # noqa: E731
    return CachedModel(inner, store, "scripted", 0, body), inner, budget


def call(model, sample=0, scope: CallScope | None = None, messages=MESSAGES):
    async def go():
        CALL_SCOPE.set(scope or CallScope(sample))
        return await model.complete(messages, [])

    return asyncio.run(go())


def test_a_hit_makes_no_call_and_spends_nothing(tmp_path):
    model, inner, budget = cached(tmp_path, [{"content": "4", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}])
    first = call(model)
    spent = budget.spent.total_tokens
    again = call(model)
    assert len(inner.calls) == 1 and spent > 0 and budget.spent.total_tokens == spent  # the budget saw one call
    assert not first.cached and again.cached
    assert (again.message, again.finish_reason, again.usage, again.model) == (
        first.message, first.finish_reason, first.usage, first.model,
    )  # fmt: skip


def test_samples_are_distinct_draws_and_a_repeated_call_in_one_attempt_is_a_new_one(tmp_path):
    model, inner, _ = cached(tmp_path)
    call(model, sample=0)
    call(model, sample=1)
    assert len(inner.calls) == 2  # sample 1 is not handed sample 0's reply
    scope = CallScope(2)
    call(model, scope=scope)
    call(model, scope=scope)  # the same request twice in one attempt: a second draw
    assert len(inner.calls) == 4
    scope = CallScope(2)  # the attempt replayed (a resume): both of its calls come back, in order
    assert call(model, scope=scope).cached and call(model, scope=scope).cached and len(inner.calls) == 4


def test_a_budget_note_is_keyed_without_its_seconds_left(tmp_path):
    model, inner, _ = cached(tmp_path)
    told = lambda seconds, tokens: [*MESSAGES, note(3, seconds, tokens, None)]  # noqa: E731
    first = call(model, messages=told(97.2, 500))
    assert call(model, messages=told(41.9, 500)).cached  # a replay, its calls answered faster or slower
    assert not call(model, messages=told(97.2, 400)).cached  # another budget: another call
    assert len(inner.calls) == 2 and inner.calls[0].messages[-1]["content"].count("97 seconds") == 1
    assert not first.cached


def test_errors_are_never_stored(tmp_path):
    model, inner, _ = cached(tmp_path, [{"content": "ok", "fail": [{"status": 500}]}])
    with pytest.raises(ModelCallError):
        call(model)
    assert len(model.cache.store) == 0
    assert not call(model).cached and call(model).cached and len(inner.calls) == 2


@pytest.mark.parametrize(("mode", "reads", "stores"), [("read", True, False), ("write", False, True)])
def test_read_mode_stores_nothing_and_write_mode_replays_nothing(tmp_path, mode, reads, stores):
    seeded, _, _ = cached(tmp_path)
    call(seeded, messages=[{"role": "user", "content": "seeded"}])
    model, inner, _ = cached(tmp_path, mode=CacheMode(mode))
    assert call(model, messages=[{"role": "user", "content": "seeded"}]).cached is reads
    call(model, messages=[{"role": "user", "content": "new"}])
    assert len(model.cache.store) == 1 + stores
    assert len(inner.calls) == 2 - reads


def test_an_expired_reply_is_not_replayed(tmp_path):
    model, inner, _ = cached(tmp_path, expire=0.2)
    call(model)
    time.sleep(0.3)
    assert not call(model).cached and len(inner.calls) == 2


def test_a_corrupt_cache_is_misses_with_one_warning(tmp_path, caplog):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cache.db").write_bytes(b"\x00garbage, not SQLite\xff" * 512)
    model, inner, _ = cached(tmp_path)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert not call(model).cached
    assert len(inner.calls) == 3
    warnings = [r for r in caplog.records if "response cache" in r.getMessage()]
    assert len(warnings) == 1 and "cannot be opened" in warnings[0].getMessage()


def test_a_full_cache_keeps_nothing_more_and_says_so_once(tmp_path, caplog):
    with diskcache.Cache(str(tmp_path / "cache"), sqlite_max_page_count=12) as full:  # SQLite's own "full"
        for i in range(200):
            try:
                full.set(f"filler{i}", "x" * 3000)
            except Exception:  # noqa: BLE001 - filled up
                break
    model, inner, _ = cached(tmp_path)
    with caplog.at_level(logging.WARNING):
        for i in range(3):
            assert not call(model, messages=[{"role": "user", "content": "long " * 500 + str(i)}]).cached
    assert len(inner.calls) == 3
    warnings = [r.getMessage() for r in caplog.records if "response cache" in r.getMessage()]
    assert len(warnings) == 1 and "cannot be written" in warnings[0] and "full" in warnings[0]


def test_the_size_limit_bounds_the_cache(tmp_path):
    model, inner, _ = cached(tmp_path, size_limit=64 * 1024)
    for i in range(300):
        call(model, messages=[{"role": "user", "content": f"{i} " + "pad " * 400}])
    assert len(inner.calls) == 300
    assert 0 < len(model.cache.store) < 300 and model.cache.store.volume() < 256 * 1024  # evicted as it went


def test_the_cache_command_shows_its_size_and_clears_it(tmp_path, capsys, monkeypatch):
    model, _, _ = cached(tmp_path)
    call(model)
    call(model, sample=1)
    model.cache.close()
    d = str(tmp_path / "cache")
    assert cache_command.main(["info", "--dir", d]) == 0 and "2 replies" in capsys.readouterr().out
    assert cache_command.main(["clear", "--dir", d]) == 0 and "2 replies removed" in capsys.readouterr().out
    monkeypatch.setenv(rc.ENV_DIR, d)  # the default dir
    assert cache_command.main(["info"]) == 0 and "0 replies" in capsys.readouterr().out
    (tmp_path / "cache" / "cache.db").write_bytes(b"garbage" * 100)
    assert cache_command.main(["clear", "--dir", d]) == 0 and "removed" in capsys.readouterr().out
    assert not (tmp_path / "cache" / "cache.db").exists()


def test_the_default_dir_is_the_users_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(rc.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert rc.default_dir() == tmp_path / "hermes-runner" / "responses"
    monkeypatch.setenv(rc.ENV_DIR, str(tmp_path / "mine"))
    assert rc.cache_dir(CacheConfig()) == tmp_path / "mine"
    assert rc.cache_dir(CacheConfig(dir="~/x")) == Path("~/x").expanduser()
