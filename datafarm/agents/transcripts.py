"""Transcripts: every exchange of a role with its model, one JSON file each, under
`transcripts/<role>/NNNN.json` (numbered per role, created exclusively, so parallel workers never
overwrite each other).

An exchange file holds what was newly sent (the rendered prompt in a conversation's first exchange,
later any message other than tool results), the model's answer with its tool calls, the results of
running those tools, tokens, cost, latency, provider, model and the retries it took. Images are
stored once as PNG files under `transcripts/<role>/images/` and referenced by hash. Everything is
passed through `secrets.redact` before it is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from datafarm.agents.messages import ImagePart, Message, ModelResponse, TextPart, ToolCall, ToolResult
from datafarm.agents.secrets import redact, redact_obj
from datafarm.hashing import sha256_file

IMAGES_DIR = "images"


class TranscriptWriter:
    """Writes one role's exchange files into `transcripts/<role>/`."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        """`transcripts/<role>/`."""

    def _image(self, image: ImagePart) -> dict[str, Any]:
        """Store the image (once) and return its reference."""
        folder = self.folder / IMAGES_DIR
        folder.mkdir(parents=True, exist_ok=True)
        ext = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}.get(image.media_type, "bin")
        name = f"{image.sha256[:16]}.{ext}"
        path = folder / name
        if not path.exists():
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_bytes(image.data)
            os.replace(tmp, path)
        return {
            "type": "image",
            "file": f"{IMAGES_DIR}/{name}",
            "sha256": image.sha256,
            "bytes": len(image.data),
            "label": image.label,
        }

    def part(self, part: Any) -> dict[str, Any]:
        """One message part as JSON."""
        if isinstance(part, TextPart):
            return {"type": "text", "text": part.text}
        if isinstance(part, ImagePart):
            return self._image(part)
        if isinstance(part, ToolCall):
            return {
                "type": "tool_call",
                "id": part.id,
                "name": part.name,
                "arguments": part.arguments,
                "raw_arguments": part.raw_arguments or None,
            }
        if isinstance(part, ToolResult):
            return {
                "type": "tool_result",
                "call_id": part.call_id,
                "name": part.name,
                "is_error": part.is_error,
                "content": [self.part(p) for p in part.content],
            }
        raise TypeError(f"not a message part: {type(part).__name__}")

    def message(self, message: Message) -> dict[str, Any]:
        """One message as JSON."""
        return {"role": message.role, "parts": [self.part(p) for p in message.parts]}

    def response(self, response: ModelResponse) -> dict[str, Any]:
        """A model answer as JSON."""
        return {
            "model": response.model,
            "id": response.response_id,
            "stop_reason": response.stop_reason,
            "parts": [self.part(p) for p in response.parts],
        }

    def write(self, record: dict[str, Any]) -> Path:
        """Write `record` (redacted) as the next `NNNN.json`; returns its path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        text = redact(json.dumps(redact_obj(record), indent=2, ensure_ascii=False, allow_nan=False)) + "\n"
        number = 1 + max((int(p.stem) for p in self.folder.glob("[0-9][0-9][0-9][0-9]*.json") if p.stem.isdigit()), default=0)
        while True:
            path = self.folder / f"{number:04d}.json"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                number += 1
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            return path


def transcript_hash(path: Path) -> str:
    """sha256 of a transcript file (what the ledger records)."""
    return sha256_file(path)
