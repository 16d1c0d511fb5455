"""The browser's egress proxy: every request (redirect hops too) is checked before any connection."""

from __future__ import annotations

import asyncio

import pytest

from hermes_runner.tools.backends.egress import EgressProxy

from tests.helpers.tool_harness import call, make_tools_cfg, run_tools


async def _raw(proxy: EgressProxy, request: bytes) -> bytes:
    host, port = proxy.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    out = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return out


def test_forwards_http_and_tunnels_connect_to_allowed_addresses(local_site):
    async def main():
        proxy = EgressProxy(is_allowed=lambda addr: addr == "127.0.0.1")
        await proxy.start()
        try:
            plain = await _raw(
                proxy,
                f"GET {local_site.url('/notes.txt')} HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\n\r\n".encode(),
            )
            tunnel = await _raw(
                proxy,
                f"CONNECT 127.0.0.1:{local_site.port} HTTP/1.1\r\n\r\nGET /notes.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
            )
            blocked = await _raw(proxy, f"CONNECT 127.0.0.2:{local_site.port} HTTP/1.1\r\n\r\n".encode())
            blocked_http = await _raw(proxy, b"GET http://127.0.0.3:9/ HTTP/1.1\r\n\r\n")
            unreachable = await _raw(proxy, b"GET http://127.0.0.1:9/ HTTP/1.1\r\n\r\n")
        finally:
            await proxy.aclose()
        return plain, tunnel, blocked, blocked_http, unreachable, proxy.refused

    plain, tunnel, blocked, blocked_http, unreachable, refused = asyncio.run(main())
    assert plain.startswith(b"HTTP/1.1 200") and plain.endswith(b"plain notes")
    assert tunnel.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200") and tunnel.endswith(
        b"plain notes"
    )
    assert blocked.startswith(b"HTTP/1.1 403") and b"127.0.0.2 resolves to a private or local address" in blocked
    assert blocked_http.startswith(b"HTTP/1.1 403")
    assert unreachable.startswith(b"HTTP/1.1 502") and b"cannot connect to 127.0.0.1:9" in unreachable
    assert refused == [f"127.0.0.2:{local_site.port}", "127.0.0.3:9"]


@pytest.mark.browser
def test_chromium_traffic_is_checked_hop_by_hop(server, local_site, tmp_path):
    cfg = make_tools_cfg(server, local_site, tmp_path, "tools.allow_private_urls=false")
    target = f"http://127.0.0.2:{local_site.port}/form.html"  # the same site, on an address the policy refuses

    async def body(ctx):
        svc = ctx.services["browser"]
        svc.egress = EgressProxy(is_allowed=lambda addr: addr == "127.0.0.1")  # 127.0.0.1 plays a public host
        s = await svc.session(ctx.state, ctx.on_close)
        local_site.hits.clear()
        ok = await s.page.goto(local_site.url("/form.html"))
        ok_title = await s.page.title()
        images_loaded = await s.page.evaluate("document.images[0].naturalWidth")
        redirected = await s.page.goto(local_site.url(f"/redirect?to={target}"))
        text = await s.page.inner_text("body")
        direct, _ = await call(ctx, "browser_navigate", url=target)  # the tool's own check comes first
        return (
            ok.status,
            ok_title,
            images_loaded,
            redirected.status,
            text,
            direct,
            list(local_site.hits),
            svc.egress.refused,
        )

    status, title, img_w, red_status, text, direct, hits, refused = run_tools(cfg, ["browser"], body)
    assert (status, title, img_w) == (200, "Greeter", 4)  # allowed traffic flows through the proxy
    assert red_status == 403 and "blocked by hermes-runner" in text  # the redirect hop was checked
    assert "/form.html" in hits and "/image.png" in hits and any(h.startswith("/redirect") for h in hits)
    assert hits.count("/form.html") == 1  # the refused hop never reached the server
    assert set(refused) == {f"127.0.0.2:{local_site.port}"}
    assert "127.0.0.2 resolves to a private or local address" in direct["error"]
