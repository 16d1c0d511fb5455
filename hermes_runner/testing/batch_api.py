"""A scripted OpenAI Batch API, mounted on the `ScriptedServer` app (tests drive it through the real `openai` SDK).

Routes: ``POST /v1/files`` (multipart, `purpose=batch`), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches`` (the list, newest first), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. Each line of
a batch's input file is answered as the chat route would answer its body (the ``#script`` grammar, its ``fail``
entries counted per attempt the same way), into the output file (status 200) or the error file (the scripted error
status). A batch moves one status per retrieve: validating -> in_progress -> its end, so a test waits on polls, not
on time; `hold` keeps the batches created from then on in_progress until `release`; `end_next` makes the next
batches end ``expired`` (the first `answered` lines answered, the others in the error file as ``batch_expired``) or
``failed`` (no line answered, the batch's ``errors`` say why). `created` lists every batch created, with the
custom_ids it carried.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

from hermes_runner.errors import ScriptSyntaxError
from hermes_runner.testing import script

STEPS = ("validating", "in_progress")


@dataclass
class Fault:
    status: str  # expired | failed
    answered: int = 0  # expired: lines answered before it expired


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    lines: list[dict]
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: str = "validating"
    held: bool = False
    fault: Fault | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: tuple[int, int] = (0, 0)  # completed, failed
    cancel: bool = False

    def wire(self) -> dict:
        out = {
            "id": self.id, "object": "batch", "endpoint": self.endpoint, "input_file_id": self.input_file_id,
            "completion_window": "24h", "status": self.status, "created_at": self.created_at,
            "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "request_counts": {"total": len(self.lines), "completed": self.counts[0], "failed": self.counts[1]},
        }  # fmt: skip
        if self.status == "failed":
            out["errors"] = {"object": "list", "data": [{"code": "scripted_failure", "message": "the batch failed"}]}
        return out


class BatchApi:
    """The files and batches of one scripted server (`_lock` guards them: tests read them from another thread)."""

    def __init__(self, server):  # its ScriptedServer (scripted_server.py): the chat route's replies and records
        self.server = server
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, Batch] = {}
        self.created: list[dict] = []  # {"id", "custom_ids"} of every batch created, in order
        self.retrieves = 0
        self._holding = False
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget every file and batch, stop holding, no fault (a test's start)."""
        with self._lock:
            self.files.clear()
            self.batches.clear()
            self.created.clear()
            self.retrieves, self._holding, self._faults = 0, False, []

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)

    def hold(self) -> None:
        """Keep every batch created from now on in_progress until `release`."""
        with self._lock:
            self._holding = True

    def release(self) -> None:
        with self._lock:
            self._holding = False
            for b in self.batches.values():
                b.held = False

    def end_next(self, status: str, n: int = 1, answered: int = 0) -> None:
        """The next `n` batches created end `status` (expired | failed) instead of completed."""
        with self._lock:
            self._faults += [Fault(status, answered) for _ in range(n)]

    def in_flight(self) -> list[str]:
        """Batches not ended yet."""
        with self._lock:
            return [b.id for b in self.batches.values() if b.status in (*STEPS, "cancelling")]

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not hasattr(upload, "file"):
            return _error(400, "expected a multipart upload with purpose=batch and a file")
        data = upload.file.read()
        with self._lock:
            fid = self._new_id("file")
            self.files[fid] = data
        meta = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": upload.filename, "purpose": "batch", "status": "processed"}  # fmt: skip
        return web.json_response(meta)

    async def _content(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _error(404, f"no such file: {request.match_info['id']}")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        data = self.files.get(body.get("input_file_id", ""))
        if data is None:
            return _error(400, f"no such input file: {body.get('input_file_id')}")
        try:
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            return _error(400, f"the input file is not JSONL: {exc}")
        with self._lock:
            batch = Batch(self._new_id("batch"), body["input_file_id"], body.get("endpoint", ""), lines)
            batch.held = self._holding
            batch.fault = self._faults.pop(0) if self._faults else None
            self.batches[batch.id] = batch
            self.created.append({"id": batch.id, "custom_ids": [line["custom_id"] for line in lines]})
        return web.json_response(batch.wire())

    async def _list(self, request: web.Request) -> web.Response:
        with self._lock:
            data = [b.wire() for b in reversed(self.batches.values())]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def _retrieve(self, request: web.Request) -> web.Response:
        with self._lock:
            batch = self.batches.get(request.match_info["id"])
            if batch is None:
                return _error(404, f"no such batch: {request.match_info['id']}")
            self.retrieves += 1
            self._advance(batch)
            return web.json_response(batch.wire())

    async def _cancel(self, request: web.Request) -> web.Response:
        with self._lock:
            batch = self.batches.get(request.match_info["id"])
            if batch is None:
                return _error(404, f"no such batch: {request.match_info['id']}")
            if batch.status in STEPS:
                batch.status, batch.cancel = "cancelling", True
            return web.json_response(batch.wire())

    def _advance(self, batch: Batch) -> None:
        """One step along validating -> in_progress -> the end (held batches stay in_progress)."""
        if batch.status == "validating":
            batch.status = "in_progress"
        elif batch.status == "cancelling":
            self._finish(batch, "cancelled", 0)
        elif batch.status == "in_progress" and not batch.held:
            fault = batch.fault
            if fault is None:
                self._finish(batch, "completed", len(batch.lines))
            else:
                self._finish(batch, fault.status, fault.answered if fault.status == "expired" else 0)

    def _finish(self, batch: Batch, status: str, answered: int) -> None:
        """End the batch: its first `answered` lines answered (output or error file), the rest not."""
        out, err = [], []
        for i, line in enumerate(batch.lines):
            if i < answered:
                code, reply = self._answer(line["body"])
                row = {"id": f"batch_req_{i}", "custom_id": line["custom_id"], "error": None,
                       "response": {"status_code": code, "request_id": f"req_{i}", "body": reply}}  # fmt: skip
                (out if code == 200 else err).append(row)
            elif status in ("expired", "cancelled"):
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": None,
                            "error": {"code": code, "message": f"This request could not be executed: {status}."}})  # fmt: skip
        batch.output_file_id = self._file(out)
        batch.error_file_id = self._file(err)
        batch.counts = (len(out), len(err))
        batch.status = status

    def _file(self, rows: list[dict]) -> str | None:
        if not rows:
            return None
        fid = self._new_id("file")
        self.files[fid] = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
        return fid

    def _answer(self, body: dict) -> tuple[int, dict]:
        """(status, body) of the chat route's reply to `body` (non-streaming; no sleep, no hang)."""
        server = self.server
        messages, tools = body.get("messages", []), body.get("tools") or []
        prompt, turn = script.first_user(messages), script.turn_of(messages)
        server.note(body, {}, prompt, turn)
        try:
            step = script.step_for(messages, tools)
        except ScriptSyntaxError as exc:
            return 400, {"error": {"message": str(exc)}}
        f = script.failure(step, server.next_attempt(prompt, turn))
        if f is not None:
            return f["status"], {
                "error": {"message": f.get("message", f"scripted error {f['status']}"), "code": f["status"]}
            }
        server.served += 1
        return 200, server.completion(body, script.offered(step, tools))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)
