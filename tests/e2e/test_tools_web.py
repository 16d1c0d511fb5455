"""web_search (SearXNG and Tavily backends) and web_extract against a real local local_site."""

from __future__ import annotations

from hermes_runner.tools.backends import unavailable

from tests.helpers.local_site import TAVILY_KEY
from tests.helpers.tool_harness import call, run_tools


def test_searxng_search_pages_through_results(tools_cfg, local_site):
    local_site.searches.clear()

    async def body(ctx):
        return await call(ctx, "web_search", query="lunar dust local_site:example.org", limit=12)

    out, ok = run_tools(tools_cfg("tools.web.searxng.language=en"), ["web"], body)
    assert ok and out["success"]
    web = out["data"]["web"]
    assert [w["position"] for w in web] == list(range(1, 13))
    assert web[0] == {
        "title": "Result 1 for lunar dust local_site:example.org",
        "url": local_site.url("/big/2000/r1.html"),
        "description": "Snippet 1",
        "position": 1,
    }
    params = [s["params"] for s in local_site.searches]
    assert [p["pageno"] for p in params] == ["1", "2"]  # 12 results need two pages of 10
    assert params[0]["q"] == "lunar dust local_site:example.org" and params[0]["format"] == "json"
    assert params[0]["language"] == "en"


def test_tavily_search_sends_key_from_env(tools_cfg, local_site, monkeypatch):
    monkeypatch.setenv("HR_TEST_TAVILY", TAVILY_KEY)
    c = tools_cfg(
        "tools.web.search_backend=tavily",
        f"tools.web.tavily.base_url={local_site.url('/tavily')}",
        "tools.web.tavily.api_key_env=HR_TEST_TAVILY",
    )
    local_site.searches.clear()

    async def body(ctx):
        return await call(ctx, "web_search", query="regolith", limit=3)

    out, ok = run_tools(c, ["web"], body)
    assert ok and [w["title"] for w in out["data"]["web"]] == [f"Result {i} for regolith" for i in (1, 2, 3)]
    assert local_site.searches[0]["json"] == {"query": "regolith", "max_results": 3, "search_depth": "basic"}
    assert "api_key" not in local_site.searches[0]["json"]

    # A wrong key is the model's error to see, not a crash.
    monkeypatch.setenv("HR_TEST_TAVILY", "wrong")
    out, ok = run_tools(c, ["web"], body)
    assert not ok and "refused the API key" in out["error"]


def test_unconfigured_search_is_reported(tools_cfg, monkeypatch):
    monkeypatch.delenv("HR_TEST_TAVILY", raising=False)
    c = tools_cfg(
        "distribution=minimal", "tools.web.search_backend=tavily", "tools.web.tavily.api_key_env=HR_TEST_TAVILY"
    )
    assert "HR_TEST_TAVILY" in unavailable(c.tools, c.model, c.distribution)["web"]
    c = tools_cfg("distribution=minimal", "tools.web.searxng.url=null")
    assert "searxng.url" in unavailable(c.tools, c.model, c.distribution)["web"]
    c = tools_cfg("distribution=minimal", "tools.web.search_backend=null")
    assert "no search backend" in unavailable(c.tools, c.model, c.distribution)["web"]


def test_extract_html_pdf_text_and_redirect(tools_cfg, local_site):
    async def body(ctx):
        return await call(
            ctx,
            "web_extract",
            urls=[
                local_site.url("/moon.html"),
                local_site.url("/doc.pdf"),
                local_site.url("/redirect?to=/notes.txt"),
                local_site.url("/nope"),
            ],
        )

    out, ok = run_tools(tools_cfg(), ["web"], body)
    assert ok
    moon, pdf, notes, missing = out["results"]
    assert moon["title"] == "The Moon"
    md = moon["content"]
    assert md.startswith("# The Moon") and "## Formation" in md and "**384,400 km**" in md
    assert "[the giant impact](https://example.org/giant-impact)" in md
    assert "- Diameter: 3,474 km" in md
    assert "SCRIPT-NOISE" not in md and "About us" not in md and "Copyright" not in md  # boilerplate gone
    assert pdf["title"] == "Regolith Notes" and "Lunar regolith covers the Moon." in pdf["content"]
    assert notes["url"] == local_site.url("/notes.txt") and notes["content"] == "plain notes"
    assert missing == {"url": local_site.url("/nope"), "error": "HTTP 404"}


def test_extract_budgets_head_and_tail(tools_cfg, local_site):
    urls = [local_site.url(f"/big/40000/p{i}.html") for i in range(5)]

    async def body(ctx):
        small, _ = await call(ctx, "web_extract", urls=urls[:1], char_limit=2000)
        many, _ = await call(ctx, "web_extract", urls=urls, char_limit=50000)
        return small, many

    small, many = run_tools(tools_cfg(), ["web"], body)
    page = small["results"][0]
    assert page["truncated"] and len(page["content"]) <= 2000 and page["content_chars"] > 40000
    assert page["content"].count("HEAD-MARKER-p0") == 1 and page["content"].count("TAIL-MARKER-p0") == 1
    assert "characters omitted" in page["content"]
    contents = [r["content"] for r in many["results"]]
    assert sum(map(len, contents)) <= 90000  # the per-call budget, shared fairly
    assert all(17000 <= len(c) <= 18000 for c in contents)
    assert all(f"TAIL-MARKER-p{i}" in c for i, c in enumerate(contents))


def test_extract_limits_and_guards(tools_cfg, local_site):
    c = tools_cfg("tools.fetch.timeout_s=3", "tools.fetch.max_bytes=100000", "tools.fetch.max_redirects=3")

    async def body(ctx):
        out = {}
        out["slow"], _ = await call(ctx, "web_extract", urls=[local_site.url("/slow?s=10")])
        out["loop"], _ = await call(ctx, "web_extract", urls=[local_site.url("/loop")])
        out["huge"], _ = await call(ctx, "web_extract", urls=[local_site.url("/huge.txt")], char_limit=500)
        out["bin"], _ = await call(ctx, "web_extract", urls=[local_site.url("/blob.bin")])
        out["file"], _ = await call(ctx, "web_extract", urls=["file:///etc/passwd"])
        out["six"] = await call(ctx, "web_extract", urls=[local_site.url("/notes.txt")] * 6)
        out["empty"] = await call(ctx, "web_extract", urls=[])
        return out

    out = run_tools(c, ["web"], body)
    assert "timed out after 3s" in out["slow"]["results"][0]["error"]
    assert "too many redirects (more than 3)" in out["loop"]["results"][0]["error"]
    huge = out["huge"]["results"][0]
    assert huge["content_chars"] == 100000 and "cut at 100000 bytes" in huge["note"] and len(huge["content"]) <= 500
    assert "unsupported content type 'application/octet-stream'" in out["bin"]["results"][0]["error"]
    assert "only http, https URLs are allowed" in out["file"]["results"][0]["error"]
    assert out["six"] == ({"error": "at most 5 URLs per call, got 6"}, False)
    assert out["empty"][1] is False


def test_private_addresses_blocked_by_default(tools_cfg, local_site):
    async def body(ctx):
        direct, _ = await call(ctx, "web_extract", urls=[local_site.url("/moon.html")])
        return direct

    out = run_tools(tools_cfg("tools.allow_private_urls=false"), ["web"], body)
    err = out["results"][0]["error"]
    assert "127.0.0.1 resolves to a private or local address" in err and "allow_private_urls" in err


def test_dns_rebinding_is_refused_at_connect_time(tools_cfg, local_site, monkeypatch):
    """A host whose DNS answered a public address for the check and a private one for the connection."""
    from hermes_runner.tools.backends import egress, fetch

    async def passed_check(url, allow_private, schemes=()):
        return None  # what the check saw: a public address

    monkeypatch.setattr(fetch, "check_url", passed_check)
    local_site.hits.clear()

    async def body(ctx):
        out, _ = await call(ctx, "web_extract", urls=[local_site.url("/moon.html")])
        return out

    out = run_tools(tools_cfg("tools.allow_private_urls=false"), ["web"], body)
    err = out["results"][0]["error"]
    assert "was blocked" in err and "private or local address" in err, err
    assert not any(h.startswith("/moon.html") for h in local_site.hits)  # the request never reached the host

    # The same fetch through the egress proxy, when the address is one it may connect to, gets the page.
    monkeypatch.setattr(fetch, "EgressProxy", lambda: egress.EgressProxy(is_allowed=lambda addr: True))
    out = run_tools(tools_cfg("tools.allow_private_urls=false"), ["web"], body)
    assert "Moon" in out["results"][0]["content"] and any(h.startswith("/moon.html") for h in local_site.hits)
