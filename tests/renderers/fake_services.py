"""Loopback fakes of the hosted video services, speaking their documented request and response shapes
(see /work/shared/reference/video-model-apis.md), with scripted failures: rate limits (HTTP 429 +
Retry-After, MiniMax's base_resp 1002), server errors, service errors, slow answers, jobs that fail
or never finish. Results are served from a second server (another host:port, like a storage
bucket), so a test can see whether the API key travelled there.

Every request is recorded (method, path, query, headers, JSON body, arrival time)."""

from __future__ import annotations

import io
import itertools
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from datafarm.renderers.video import encode_video

KEY = "test-key-9f1c"
"""The API key the fakes accept."""


@dataclass
class Seen:
    """One request a fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    at: float


@dataclass
class Reply:
    """A scripted answer: status, JSON body, headers, and a delay before answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def result_video(seed: int, frames: int = 30, width: int = 128, height: int = 96) -> bytes:
    """The video a fake 'generates': frame j is a flat colour whose green channel is 8 j and whose red
    channel depends on the job's seed, with a white bar whose position moves with j."""
    out = []
    for j in range(frames):
        image = np.zeros((height, width, 3), dtype=np.uint8)
        image[..., 0] = 40 + seed % 150
        image[..., 1] = (8 * j) % 256
        image[..., 2] = 90
        x = 4 + (j * 3) % (width - 8)
        image[:, x:x + 4] = 255
        out.append(image)
    return encode_video(out, 24)


class _Storage:
    """Serves result videos at /files/<name>.mp4 (a different host:port than the API)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[Seen] = []
        storage = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                storage.requests.append(Seen("GET", self.path, {}, dict(self.headers), None, time.monotonic()))
                name = self.path.rsplit("/", 1)[-1]
                data = storage.files.get(name)
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Type", "video/mp4")
                self.send_header("Content-Length", str(len(data or b"")))
                self.end_headers()
                self.wfile.write(data or b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def put(self, name: str, data: bytes) -> str:
        self.files[name] = data
        return f"{self.url}/files/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakeService:
    """A loopback fake of one service. `script` maps a route name to a list of Replies served (one
    per request) before the normal behaviour; `statuses` is the sequence of job statuses polls see
    (the last one repeats)."""

    routes: dict[str, tuple[str, str]] = {}
    """route name -> (method, path prefix)."""

    def __init__(self, statuses: list[str], video: Callable[[dict], bytes] | None = None) -> None:
        self.statuses = statuses
        self.video = video or (lambda body: result_video(int(body.get("seed", 7) or 7)))
        self.script: dict[str, list[Reply]] = {}
        self.requests: list[Seen] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self.storage = _Storage()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                seen = Seen(method, parsed.path, dict(urllib.parse.parse_qsl(parsed.query)), dict(self.headers), body,
                            time.monotonic())
                fake.requests.append(seen)
                reply = fake.answer(seen)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode() if reply.body is not None else b""
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def route(self, seen: Seen) -> str:
        for name, (method, prefix) in self.routes.items():
            if seen.method == method and seen.path.startswith(prefix):
                return name
        return "unknown"

    def answer(self, seen: Seen) -> Reply:
        queue = self.script.get(self.route(seen))
        if queue:
            return queue.pop(0)
        return self.handle(self.route(seen), seen)

    def handle(self, route: str, seen: Seen) -> Reply:  # pragma: no cover - overridden
        raise NotImplementedError

    def next_status(self, task: dict[str, Any]) -> str:
        task["polls"] += 1
        return self.statuses[min(task["polls"] - 1, len(self.statuses) - 1)]

    def seen(self, route: str) -> list[Seen]:
        """Requests that hit `route`."""
        return [s for s in self.requests if self.route(s) == route]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.storage.close()


class FakeMiniMax(FakeService):
    """POST /v1/video_generation, GET /v1/query/video_generation, GET /v1/files/retrieve."""

    routes = {"create": ("POST", "/v1/video_generation"), "query": ("GET", "/v1/query/video_generation"),
              "retrieve": ("GET", "/v1/files/retrieve")}

    @staticmethod
    def base_resp(code: int = 0, message: str = "success") -> dict[str, Any]:
        return {"status_code": code, "status_msg": message}

    def handle(self, route: str, seen: Seen) -> Reply:
        if seen.headers.get("Authorization") != f"Bearer {KEY}":
            return Reply(200, {"base_resp": self.base_resp(1004, "authorization failed")}, {"Trace-Id": "trace-auth"})
        trace = {"Trace-Id": f"trace-{len(self.requests)}"}
        if route == "create":
            body = seen.body or {}
            if not body.get("model") or not body.get("prompt"):
                return Reply(200, {"base_resp": self.base_resp(2013, "invalid params: model and prompt are required")}, trace)
            task_id = f"{next(self._ids):018d}"
            self.tasks[task_id] = {"body": body, "polls": 0}
            return Reply(200, {"task_id": task_id, "base_resp": self.base_resp()}, trace)
        if route == "query":
            task = self.tasks.get(seen.query.get("task_id", ""))
            if task is None:
                return Reply(200, {"base_resp": self.base_resp(1000, "task not found")}, trace)
            status = self.next_status(task)
            answer: dict[str, Any] = {"task_id": seen.query["task_id"], "status": status, "base_resp": self.base_resp()}
            if status == "Success":
                answer.update(file_id=f"file{seen.query['task_id']}", video_width=128, video_height=96)
            if status == "Fail":
                answer["base_resp"] = self.base_resp(1026, "video generation failed: content moderation")
            return Reply(200, answer, trace)
        if route == "retrieve":
            file_id = seen.query.get("file_id", "")
            task = self.tasks.get(file_id.removeprefix("file"))
            if task is None:
                return Reply(200, {"base_resp": self.base_resp(1000, "file not found")}, trace)
            data = self.video(task["body"])
            url = self.storage.put(f"{file_id}.mp4", data)
            return Reply(200, {"file": {"file_id": file_id, "bytes": len(data), "created_at": 1700000000,
                                        "filename": "output.mp4", "purpose": "video_generation", "download_url": url},
                               "base_resp": self.base_resp()}, trace)
        return Reply(404, {"base_resp": self.base_resp(1000, "unknown endpoint")})


class FakeSeedance(FakeService):
    """POST/GET/DELETE {base}/contents/generations/tasks[/{id}], base = /api/v3."""

    routes = {"create": ("POST", "/api/v3/contents/generations/tasks"),
              "get": ("GET", "/api/v3/contents/generations/tasks/"),
              "delete": ("DELETE", "/api/v3/contents/generations/tasks/")}

    @staticmethod
    def error(status: int, code: str, message: str) -> Reply:
        return Reply(status, {"error": {"code": code, "message": message, "type": "BadRequest"}})

    @property
    def base_url(self) -> str:
        return f"{self.url}/api/v3"

    def handle(self, route: str, seen: Seen) -> Reply:
        if seen.headers.get("Authorization") != f"Bearer {KEY}":
            return self.error(401, "AuthenticationError", "the API key is invalid")
        if route == "create":
            body = seen.body or {}
            content = body.get("content")
            if not body.get("model") or not isinstance(content, list) or not content:
                return self.error(400, "MissingParameter", "model and content are required")
            roles = {item.get("role") for item in content if item.get("type") == "image_url"}
            if roles & {"first_frame", "last_frame"} and "reference_image" in roles:
                return self.error(400, "InvalidParameter", "first/last frame cannot be mixed with reference images")
            task_id = f"cgt-2025{next(self._ids):08d}"
            self.tasks[task_id] = {"body": body, "polls": 0}
            return Reply(200, {"id": task_id})
        task_id = seen.path.rsplit("/", 1)[-1]
        task = self.tasks.get(task_id)
        if task is None:
            return self.error(404, "InvalidEndpoint.NotFound", f"task {task_id} not found")
        if route == "delete":
            task["cancelled"] = True
            return Reply(200, {})
        status = self.next_status(task)
        answer: dict[str, Any] = {"id": task_id, "model": task["body"]["model"], "status": status,
                                  "created_at": 1700000000, "updated_at": 1700000010, "seed": task["body"].get("seed"),
                                  "resolution": task["body"].get("resolution"), "ratio": task["body"].get("ratio"),
                                  "duration": task["body"].get("duration"), "framespersecond": 24}
        if status == "succeeded":
            data = self.video(task["body"])
            answer["content"] = {"video_url": self.storage.put(f"{task_id}.mp4", data)}
            answer["usage"] = {"completion_tokens": 128 * 96 * 30 // 1024, "total_tokens": 128 * 96 * 30 // 1024}
        if status == "failed":
            answer["error"] = {"code": "OutputVideoSensitiveContentDetected", "message": "the output video may be sensitive"}
        return Reply(200, answer)


def decode_png(url: str) -> np.ndarray:
    """RGB image of a PNG data URL."""
    import cv2

    from datafarm.renderers.hosted.media import decode_data_url

    kind, data = decode_data_url(url)
    assert kind == "image/png"
    return cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def decode_mp4(url: str) -> np.ndarray:
    """Frames of an MP4 data URL."""
    from datafarm.renderers.hosted.media import decode_data_url
    from datafarm.renderers.video import read_video

    kind, data = decode_data_url(url)
    assert kind == "video/mp4"
    return read_video(io.BytesIO(data).getvalue())[0]
