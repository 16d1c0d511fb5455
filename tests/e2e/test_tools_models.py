"""vision_analyze, image_generate and mixture_of_agents against the real scripted OpenAI-compatible server."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from aiohttp import web

from hermes_runner.testing.scripted_server import describe_image, png_bytes
from hermes_runner.tools.backends import unavailable

from tests.helpers.tool_harness import call, run_tools


def _image_parts(seen) -> list[bytes]:
    content = seen.body["messages"][-1]["content"]
    return [base64.b64decode(p["image_url"]["url"].split(",", 1)[1]) for p in content if p["type"] == "image_url"]


def test_vision_from_url_and_from_sandbox_file(tools_cfg, local_site, server):
    local = png_bytes(5, 2, (1, 2, 3))

    async def body(ctx):
        await ctx.sandbox.write_file("shots/pic.png", local)
        by_url = await call(
            ctx, "vision_analyze", image_url=local_site.url("/image.png"), question="What colour is it?"
        )
        by_file = await call(ctx, "vision_analyze", image_url="shots/pic.png", question="How wide?")
        return by_url, by_file

    (url_out, ok1), (file_out, ok2) = run_tools(tools_cfg(), ["vision"], body)
    served = png_bytes(4, 3, (200, 10, 10))
    assert ok1 and url_out == {"success": True, "analysis": f"I see 1 image(s): {describe_image(served)}"}
    assert ok2 and "image/png 5x2" in file_out["analysis"]
    first, second = [r for r in server.requests if r.body.get("model") == "vision-test"]
    assert _image_parts(first) == [served] and _image_parts(second) == [local]
    text = first.body["messages"][-1]["content"][0]["text"]
    assert text.endswith("What colour is it?") and text.startswith("Fully describe")
    assert first.body["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_vision_refuses_what_is_not_an_image(tools_cfg, local_site):
    async def body(ctx):
        await ctx.sandbox.write_file("notes.txt", b"hello")
        return [
            await call(ctx, "vision_analyze", image_url="notes.txt", question="?"),
            await call(ctx, "vision_analyze", image_url="missing.png", question="?"),
            await call(ctx, "vision_analyze", image_url=local_site.url("/nope.png"), question="?"),
            await call(ctx, "vision_analyze", image_url="ftp://x/y.png", question="?"),
            await call(ctx, "vision_analyze", image_url=local_site.url("/image.png"), question=""),
        ]

    outs = run_tools(tools_cfg(), ["vision"], body)
    assert all(not ok for _, ok in outs)
    errors = [o["error"] for o, _ in outs]
    assert "is not a PNG, JPEG, GIF or WebP image" in errors[0]
    assert "file not found: missing.png" in errors[1]
    assert "HTTP 404" in errors[2]
    assert "unsupported image source" in errors[3]
    assert errors[4] == "'question' must be a non-empty string"


def test_vision_endpoint_with_its_own_key_env(tools_cfg, server, monkeypatch):
    c = tools_cfg(
        f"tools.vision.endpoint.base_url={server.url}", "tools.vision.endpoint.api_key_env=HR_TEST_VISION_KEY"
    )
    monkeypatch.delenv("HR_TEST_VISION_KEY", raising=False)
    assert "HR_TEST_VISION_KEY" in unavailable(c.tools, c.model, c.distribution)["vision"]
    monkeypatch.setenv("HR_TEST_VISION_KEY", "sk-vision-123")
    assert "vision" not in unavailable(c.tools, c.model, c.distribution)

    async def body(ctx):
        return await call(
            ctx,
            "vision_analyze",
            image_url="data:image/png;base64," + base64.b64encode(png_bytes(2, 2, (0, 0, 0))).decode(),
            question="?",
        )

    out, ok = run_tools(c, ["vision"], body)
    assert ok and "image/png 2x2" in out["analysis"]
    assert server.requests[-1].headers["Authorization"] == "Bearer sk-vision-123"


@pytest.mark.parametrize("fmt", ["b64_json", "url"])
def test_image_generate_saves_into_the_sandbox(tools_cfg, server, fmt):
    async def body(ctx):
        gen, ok = await call(ctx, "image_generate", prompt="A red fox in the snow", aspect_ratio="portrait")
        data = await ctx.sandbox.read_file(gen["image"])
        seen, _ = await call(ctx, "vision_analyze", image_url=gen["image"], question="What is it?")
        return gen, ok, data, seen

    gen, ok, data, seen = run_tools(
        tools_cfg(f"tools.image_gen.response_format={fmt}", "tools.image_gen.sizes.portrait=64x96"),
        ["image_gen", "vision"],
        body,
    )
    assert ok and gen["success"] and gen["mime_type"] == "image/png"
    assert gen["image"].startswith("generated_images/a-red-fox-in-the-snow-") and gen["image"].endswith(".png")
    assert data == png_bytes(64, 96, tuple(hashlib.sha256(b"A red fox in the snow").digest()[:3]))
    assert gen["bytes"] == len(data) and gen["revised_prompt"] == "A red fox in the snow"
    assert ("url" in gen) == (fmt == "url")
    assert "image/png 64x96" in seen["analysis"]  # generated, saved, then seen by the vision tool
    req = next(r for r in server.requests if r.body.get("model") == "image-test")
    assert req.body["size"] == "64x96" and req.body["response_format"] == fmt and req.body["n"] == 1


def test_image_generate_bad_aspect_and_endpoint_error(tools_cfg, server):
    async def body(ctx):
        bad, _ = await call(ctx, "image_generate", prompt="x", aspect_ratio="panorama")
        return bad

    bad = run_tools(tools_cfg(), ["image_gen"], body)
    assert bad["error"] == "'aspect_ratio' must be one of landscape, square, portrait, not 'panorama'"

    async def body2(ctx):
        return await call(ctx, "image_generate", prompt="x", aspect_ratio="square")

    out, ok = run_tools(tools_cfg("tools.image_gen.sizes.square=notasize"), ["image_gen"], body2)
    assert not ok and "HTTP 400" in out["error"] and "bad size" in out["error"]


def _moa_handler(fail: set[str]):
    def handler(body: dict, srv) -> dict | web.Response | None:
        model = body.get("model")
        if model in fail:
            return web.json_response({"error": {"message": f"{model} is down"}}, status=400)
        if model in ("ref-a", "ref-b"):
            return srv.completion(body, {"content": f"{model} says 42"})
        if model == "agg":
            system = body["messages"][0]["content"]
            return srv.completion(
                body, {"content": "combined: " + json.dumps(system.split("Answers from the models:")[1].strip())}
            )
        return None

    return handler


def test_mixture_of_agents_aggregates_parallel_answers(tools_cfg, server):
    server.handler = _moa_handler(set())

    async def body(ctx):
        return await call(ctx, "mixture_of_agents", user_prompt="What is 6 x 7?")

    out, ok = run_tools(tools_cfg(), ["moa"], body)
    assert ok and out["success"]
    assert out["response"] == 'combined: "1. ref-a says 42\\n2. ref-b says 42"'
    assert out["models_used"] == {"reference_models": ["ref-a", "ref-b"], "aggregator_model": "agg"}
    refs = [r for r in server.requests if r.body["model"] in ("ref-a", "ref-b")]
    assert all(r.body["messages"] == [{"role": "user", "content": "What is 6 x 7?"}] for r in refs)
    agg = next(r for r in server.requests if r.body["model"] == "agg")
    assert agg.body["messages"][-1] == {"role": "user", "content": "What is 6 x 7?"}
    assert agg.body["temperature"] == 0.4  # from hermes_runner/conf/tools/default.yaml


def test_mixture_of_agents_survives_one_failure_not_all(tools_cfg, server):
    async def body(ctx):
        return await call(ctx, "mixture_of_agents", user_prompt="Hard question")

    server.handler = _moa_handler({"ref-b"})
    out, ok = run_tools(tools_cfg(), ["moa"], body)
    assert ok and out["response"] == 'combined: "1. ref-a says 42"'
    assert "ref-b is down" in out["failed_models"]["ref-b"]

    server.handler = _moa_handler({"ref-a", "ref-b"})
    out, ok = run_tools(tools_cfg(), ["moa"], body)
    assert not ok and not out["success"] and "only 0 of 2 reference models answered (need 1)" in out["error"]
    assert not any(r.body["model"] == "agg" for r in server.requests[-2:])
