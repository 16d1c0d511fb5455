"""The browser toolset over a real headless Chromium (Debian's package) and a real local local_site."""

from __future__ import annotations

import re

import pytest

from tests.helpers.tool_harness import call, run_tools

# Fails with how to install Chromium when it is missing (tests/helpers/machine.require).
pytestmark = pytest.mark.browser


def ref_of(snapshot: str, pattern: str) -> str:
    m = re.search(pattern + r".*?\[ref=(e\d+)\]", snapshot)
    assert m, f"{pattern!r} not in snapshot:\n{snapshot}"
    return "@" + m.group(1)


def test_navigate_type_click_press_back_scroll_images(tools_cfg, local_site):
    async def body(ctx):
        r = {}
        r["nav"] = await call(ctx, "browser_navigate", url=local_site.url("/form.html"))
        snap = r["nav"][0]["snapshot"]
        r["type"] = await call(ctx, "browser_type", ref=ref_of(snap, 'textbox "Your name"'), text="Ada")
        r["click"] = await call(ctx, "browser_click", ref=ref_of(snap, 'button "Greet"'))
        r["after_click"] = await call(ctx, "browser_snapshot")
        snap = r["after_click"][0]["snapshot"]
        await call(ctx, "browser_type", ref=ref_of(snap, 'textbox "Your name"'), text="Grace")
        r["press"] = await call(ctx, "browser_press", key="Enter")
        r["after_press"] = await call(ctx, "browser_snapshot", full=True)
        r["images"] = await call(ctx, "browser_get_images")
        r["down"] = await call(ctx, "browser_scroll", direction="down")
        r["link"] = await call(
            ctx, "browser_click", ref=ref_of(r["after_press"][0]["snapshot"], 'link "Read about the Moon"')
        )
        r["moon"] = await call(ctx, "browser_snapshot")
        r["back"] = await call(ctx, "browser_back")
        return r

    r = run_tools(tools_cfg(), ["browser"], body)
    nav, ok = r["nav"]
    assert ok and nav["status"] == 200 and nav["title"] == "Greeter" and nav["url"] == local_site.url("/form.html")
    assert 'heading "Greeter" [level=1]' in nav["snapshot"] and "Nobody greeted yet" in nav["snapshot"]
    assert r["type"] == ({"success": True, "typed": "Ada", "ref": r["type"][0]["ref"]}, True)
    assert r["click"][1] and "Hello, Ada!" in r["after_click"][0]["snapshot"]
    assert r["press"][1] and "Hello, Grace!" in r["after_press"][0]["snapshot"]
    images = r["images"][0]["images"]
    assert images == [{"url": local_site.url("/image.png"), "alt": "a red pixel block", "width": 4, "height": 3}]
    assert r["down"][0]["scroll_y"] > 0
    assert r["link"][0]["url"] == local_site.url("/moon.html") and r["link"][0]["title"] == "Moon Facts"
    assert 'heading "The Moon" [level=1]' in r["moon"][0]["snapshot"]
    assert r["back"][0]["url"] == local_site.url("/form.html")


def test_errors_go_back_to_the_model(tools_cfg, local_site):
    async def body(ctx):
        r = {"before": await call(ctx, "browser_snapshot")}
        await call(ctx, "browser_navigate", url=local_site.url("/form.html"))
        r["bad_ref"] = await call(ctx, "browser_click", ref="button")
        r["stale_ref"] = await call(ctx, "browser_click", ref="@e999")
        r["file"] = await call(ctx, "browser_navigate", url="file:///etc/passwd")
        r["missing"] = await call(ctx, "browser_navigate", url=local_site.url("/nope"))
        r["key"] = await call(ctx, "browser_press", key="NotAKey")
        return r

    r = run_tools(tools_cfg("tools.browser.action_timeout_s=5"), ["browser"], body)  # each good action gets 5 s
    assert r["before"] == ({"error": "no page is open: call browser_navigate first"}, False)
    assert "'ref' must be an element ref" in r["bad_ref"][0]["error"]
    assert not r["stale_ref"][1] and "e999" in r["stale_ref"][0]["error"]
    assert "only http, https URLs are allowed" in r["file"][0]["error"]
    assert r["missing"][0]["status"] == 404 and not r["missing"][1]
    assert not r["key"][1] and "NotAKey" in r["key"][0]["error"]


def test_tasks_are_isolated_and_cleaned_up(tools_cfg, local_site):
    async def body(a, b):
        svc = a.services["browser"]
        await call(a, "browser_navigate", url=local_site.url("/set-storage.html"))
        seen_a, _ = await call(a, "browser_navigate", url=local_site.url("/read-storage.html"))
        seen_b, _ = await call(b, "browser_navigate", url=local_site.url("/read-storage.html"))
        open_both = svc.open_contexts()
        await a.aclose()  # task A ends: its context goes
        open_after_a = svc.open_contexts()
        await b.aclose()
        return seen_a, seen_b, open_both, open_after_a, svc.open_contexts()

    seen_a, seen_b, both, after_a, after_b = run_tools(tools_cfg(), ["browser"], body, tasks=2)
    assert "storage=task-A-secret cookie=who=task-A" in seen_a["snapshot"]
    assert "storage=none cookie=none" in seen_b["snapshot"]
    assert (both, after_a, after_b) == (2, 1, 0)


def test_private_addresses_blocked_unless_allowed(tools_cfg, local_site):
    async def body(ctx):
        return await call(ctx, "browser_navigate", url=local_site.url("/form.html"))

    out, ok = run_tools(tools_cfg("tools.allow_private_urls=false"), ["browser"], body)
    assert not ok and "resolves to a private or local address" in out["error"]
