"""The pipe protocol's pieces on their own: framing, the bounded reader, request envelopes,
finiteness checks, and the documentation agents read (every op, violation, refusal and skill)."""

from __future__ import annotations

import ast
import json
import os
import threading
import time

import pytest

from datafarm.capability.bundle import BUNDLES_DIR
from datafarm.harness import protocol
from datafarm.harness.protocol import (
    OPS,
    EndOfStream,
    FrameReader,
    ProtocolViolation,
    Refusal,
    Violation,
    encode,
    find_non_finite,
    parse_request,
    write_all,
)

API_FILE = BUNDLES_DIR / "k2" / "harness_api" / "datafarm_expert.py"
SKILL_FILE = BUNDLES_DIR / "k2" / "skills" / "expert.md"


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def test_encode_frames_compact_json_and_refuses_nan_and_oversize():
    framed = encode({"seq": 1, "ok": True, "result": {"x": 1.5}})
    assert framed[:4] == len(framed[4:]).to_bytes(4, "big")
    assert json.loads(framed[4:]) == {"seq": 1, "ok": True, "result": {"x": 1.5}}
    with pytest.raises(ValueError):
        encode({"x": float("nan")})
    with pytest.raises(ValueError):
        encode({"x": "a" * 2000}, max_bytes=1024)


def test_reader_returns_one_message_at_a_time(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, encode({"seq": 1, "op": "hello"}) + encode({"seq": 2, "op": "observe"}))
    reader = FrameReader(read_fd)
    first = reader.read(time.monotonic() + 1)
    assert json.loads(first) == {"seq": 1, "op": "hello"}
    assert len(reader._buffer) == 0  # never reads ahead into the next message
    assert json.loads(reader.read(time.monotonic() + 1))["seq"] == 2


def test_reader_refuses_an_oversized_header_without_reading_the_body(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, (1 << 20).to_bytes(4, "big") + b"x" * 1000)
    with pytest.raises(ProtocolViolation) as caught:
        FrameReader(read_fd, max_bytes=65536).read(time.monotonic() + 1)
    assert caught.value.code is Violation.OVERSIZED
    assert caught.value.message.startswith("declared message length 1048576 bytes exceeds the 65536-byte limit")


def test_reader_explains_text_where_a_header_should_be(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, b"hello world\n")
    with pytest.raises(ProtocolViolation) as caught:
        FrameReader(read_fd).read(time.monotonic() + 1)
    assert "text 'hell': did the controller print to stdout?" in caught.value.message


def test_reader_reports_the_end_of_stream_and_a_truncated_message(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, (100).to_bytes(4, "big") + b"{\"seq\"")
    os.close(write_fd)
    with pytest.raises(EndOfStream) as caught:
        FrameReader(read_fd).read(time.monotonic() + 1)
    assert caught.value.partial == 10


def test_reader_never_blocks_past_its_deadline(pipe):
    read_fd, _ = pipe
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        FrameReader(read_fd).read(started + 0.3)
    assert 0.25 < time.monotonic() - started < 1.0


def test_reader_ends_when_the_writer_is_gone_but_the_pipe_stays_open(pipe):
    read_fd, _ = pipe  # a stray process could hold the write end after the controller died
    started = time.monotonic()
    with pytest.raises(EndOfStream):
        FrameReader(read_fd, finished=lambda: True, linger=0.2).read(started + 10)
    assert time.monotonic() - started < 1.0


def test_write_all_times_out_on_a_full_pipe(pipe):
    read_fd, write_fd = pipe
    os.set_blocking(write_fd, False)
    with pytest.raises(TimeoutError):
        write_all(write_fd, b"x" * (4 << 20), timeout=0.3)
    # a reader that drains keeps it going
    os.set_blocking(read_fd, False)  # empty what the timed-out write left in the pipe
    try:
        while os.read(read_fd, 1 << 20):
            pass
    except BlockingIOError:
        pass
    os.set_blocking(read_fd, True)
    received = []

    def drain() -> None:
        while sum(received) < 1 << 18:
            received.append(len(os.read(read_fd, 1 << 16)))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    write_all(write_fd, b"y" * (1 << 18), timeout=5)
    reader.join(5)
    assert sum(received) == 1 << 18


@pytest.mark.parametrize(
    ("payload", "code", "message"),
    [
        (b"", Violation.MALFORMED, "empty message (length 0)"),
        (b"\xff\xfe\x00garbage", Violation.MALFORMED, "message is not UTF-8 (invalid start byte at byte 0)"),
        (b"{not json", Violation.MALFORMED, "message is not valid JSON"),
        (b"[1, 2]", Violation.MALFORMED, "message is a JSON list, not an object"),
        (b'{"op": "observe"}', Violation.MALFORMED, "`seq` must be an integer, got null"),
        (b'{"seq": true, "op": "observe"}', Violation.MALFORMED, "`seq` must be an integer, got true"),
        (b'{"seq": 1.0, "op": "observe"}', Violation.MALFORMED, "`seq` must be an integer, got 1.0"),
        (b'{"seq": 1, "seq": 2, "op": "observe"}', Violation.MALFORMED, "message is not valid JSON: duplicate key 'seq'"),
        (b'{"seq": 1, "op": "observe", "pose": [0, 0, 0]}', Violation.MALFORMED, "unexpected envelope keys ['pose']"),
        (b'{"seq": 1, "op": ""}', Violation.MALFORMED, "`op` must be a non-empty string"),
        (b'{"seq": 1, "op": "observe", "args": [1]}', Violation.MALFORMED, "`args` must be an object"),
        (b'{"seq": 3, "op": "observe"}', Violation.OUT_OF_ORDER, "expected seq 1, got 3"),
        (b"[" * 100000, Violation.MALFORMED, "message is not valid JSON"),
    ],
)
def test_envelope_violations(payload, code, message):
    with pytest.raises(ProtocolViolation) as caught:
        parse_request(payload, expected_seq=1)
    assert caught.value.code is code
    assert caught.value.message.startswith(message)


def test_a_good_envelope_keeps_nan_for_the_command_check():
    request = parse_request(b'{"seq": 4, "op": "move_joints", "args": {"q": [0, NaN, 1e999]}}', expected_seq=4)
    assert (request.seq, request.op) == (4, "move_joints")
    assert find_non_finite(request.args) == "args.q[1]"
    assert find_non_finite({"a": [1, 2.5, {"b": -1e308}]}) is None
    deep: list = []
    node = deep
    for _ in range(5000):  # deeper than Python's recursion limit: still answered
        node.append([])
        node = node[0]
    node.append(float("inf"))
    assert find_non_finite(deep).endswith("[0]")


def test_module_docstring_documents_every_op_violation_and_refusal():
    doc = protocol.__doc__
    for name in OPS:
        assert f"\n    {name}" in doc, name
    for code in [*Violation, *Refusal]:
        assert f"`{code.value}`" in doc, code


def _api_public_methods() -> set[str]:
    tree = ast.parse(API_FILE.read_text())
    harness = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Harness")
    return {n.name for n in harness.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def test_api_module_is_stdlib_and_numpy_only():
    tree = ast.parse(API_FILE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    import sys

    assert imported - {"__future__", "numpy"} <= set(sys.stdlib_module_names)


def test_expert_skill_documents_every_api_method_skill_and_code():
    text = SKILL_FILE.read_text()
    methods = _api_public_methods()
    assert {"observe", "move_joints", "move_ee", "open_gripper", "close_gripper", "wait", "done", "approach",
            "grasp", "lift", "place", "insert", "push_handle", "pull_handle", "strike"} <= methods
    for name in methods:
        assert f"`{name}(" in text, f"expert.md does not document Harness.{name}"
    for code in [*Violation, *Refusal]:
        assert f"`{code.value}`" in text, code
    for op in OPS:
        assert f"`{op}`" in text, op
    assert "set_pose" in text  # says plainly there is no such call
