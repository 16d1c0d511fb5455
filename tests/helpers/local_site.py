"""A real local web site for tool tests: pages, a PDF, images, redirects, a slow page, a
SearXNG-compatible JSON search endpoint and a Tavily-compatible one, served by aiohttp
from a background thread."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from hermes_runner.testing.loopback import LoopbackApp
from hermes_runner.testing.scripted_server import png_bytes

TAVILY_KEY = "tvly-test-key"

MOON = """<!doctype html><html><head><title>Moon Facts</title>
<script>window.tracker = "SCRIPT-NOISE";</script><style>.x{color:red}</style></head><body>
<nav><a href="/">Home</a> | <a href="/about">About us</a></nav>
<article><h1>The Moon</h1>
<p>The Moon is Earth's only natural satellite. It orbits at an average distance of <b>384,400 km</b>.</p>
<h2>Formation</h2>
<p>It formed about 4.5 billion years ago, see <a href="https://example.org/giant-impact">the giant impact</a>.</p>
<ul><li>Diameter: 3,474 km</li><li>Surface gravity: 1.62 m/s2</li></ul>
</article>
<footer>Copyright Example Corp. All rights reserved.</footer></body></html>"""

FORM = """<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Greeter</h1>
<form id="f" onsubmit="event.preventDefault(); document.getElementById('out').textContent = 'Hello, ' + document.getElementById('name').value + '!';">
<label for="name">Your name</label> <input id="name" name="name" type="text">
<button type="submit">Greet</button>
</form>
<p id="out">Nobody greeted yet</p>
<p><a href="/moon.html">Read about the Moon</a></p>
<img src="/image.png" alt="a red pixel block">
<div style="height: 4000px">tall spacer</div>
<p>Bottom of the page</p>
</body></html>"""

SET_STORAGE = """<!doctype html><html><head><title>Set</title></head><body>
<script>localStorage.setItem("secret", "task-A-secret"); document.cookie = "who=task-A; path=/";</script>
<p>stored</p></body></html>"""

READ_STORAGE = """<!doctype html><html><head><title>Read</title></head><body><p id="v">?</p>
<script>document.getElementById("v").textContent =
  "storage=" + (localStorage.getItem("secret") || "none") + " cookie=" + (document.cookie || "none");</script>
</body></html>"""


def make_pdf(lines: list[str], title: str) -> bytes:
    """A one-page PDF with `lines` of Helvetica text and a document title."""

    def esc(t: str) -> str:
        return t.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = " ".join(f"({esc(line)}) Tj 0 -24 Td" for line in lines)
    stream = f"BT /F1 16 Tf 72 720 Td {ops} ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({esc(title)}) >>".encode(),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def big_page(n: int, tag: str) -> str:
    body = " ".join(f"Sentence {i} of the {tag} page about lunar science." for i in range(n // 45 + 1))
    return (
        f"<html><head><title>Big {tag}</title></head><body><article><h1>Big {tag}</h1>"
        f"<p>HEAD-MARKER-{tag} {body} TAIL-MARKER-{tag}</p></article></body></html>"
    )


def static(body: bytes, content_type: str):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type)

    return handler


class LocalSite(LoopbackApp):
    def __init__(self) -> None:
        self.searches: list[dict] = []  # every search request (params or JSON body, and headers)
        self.hits: list[str] = []  # path and query of every request

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- handlers -------------------------------------------------------------------

    def app(self) -> web.Application:
        @web.middleware
        async def log_hits(request: web.Request, handler):
            self.hits.append(request.path_qs)
            return await handler(request)

        app = web.Application(middlewares=[log_hits])
        r = app.router
        r.add_get("/moon.html", static(MOON.encode(), "text/html"))
        r.add_get("/form.html", static(FORM.encode(), "text/html"))
        r.add_get("/set-storage.html", static(SET_STORAGE.encode(), "text/html"))
        r.add_get("/read-storage.html", static(READ_STORAGE.encode(), "text/html"))
        r.add_get("/doc.pdf", static(self.pdf, "application/pdf"))
        r.add_get("/image.png", static(png_bytes(4, 3, (200, 10, 10)), "image/png"))
        r.add_get("/notes.txt", static(b"plain notes", "text/plain"))
        r.add_get("/huge.txt", static(b"x" * 3_000_000, "text/plain"))
        r.add_get("/blob.bin", static(b"\x00\x01" * 50, "application/octet-stream"))
        r.add_get("/big/{n}/{tag}.html", self._big)
        r.add_get("/redirect", self._redirect)
        r.add_get("/loop", self._loop_redirect)
        r.add_get("/slow", self._slow)
        r.add_get("/search", self._searxng)
        r.add_post("/tavily/search", self._tavily)
        return app

    pdf = make_pdf(["Lunar regolith covers the Moon.", "It is a layer of loose dust and rock."], "Regolith Notes")

    async def _big(self, request: web.Request) -> web.Response:
        n, tag = int(request.match_info["n"]), request.match_info["tag"]
        return web.Response(text=big_page(n, tag), content_type="text/html")

    async def _loop_redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def _redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query.get("to", "/moon.html"))

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "5")))
        return web.Response(text="finally", content_type="text/plain")

    def _hits(self, query: str, n: int) -> list[dict]:
        return [
            {"url": self.url(f"/big/2000/r{i}.html"), "title": f"Result {i} for {query}", "content": f"Snippet {i}"}
            for i in range(1, n + 1)
        ]

    async def _searxng(self, request: web.Request) -> web.Response:
        self.searches.append({"params": dict(request.query), "headers": dict(request.headers)})
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        page = int(request.query.get("pageno", "1"))
        hits = self._hits(request.query.get("q", ""), 25)[(page - 1) * 10 : page * 10]
        return web.json_response({"query": request.query.get("q"), "number_of_results": 25, "results": hits})

    async def _tavily(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.searches.append({"json": body, "headers": dict(request.headers)})
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        hits = self._hits(body["query"], body.get("max_results", 5))
        return web.json_response({"query": body["query"], "results": [{**h, "score": 0.9} for h in hits]})


def as_json(result) -> dict:
    return json.loads(result.content)
