"""The Docker provider's parts that run without an engine: the attach-stream demultiplexer over a
real socket pair, and the reason given where no engine answers. (The provider's behaviour with an
engine is covered by the shared self-check and hostile suites, which run it where one answers.)"""

from __future__ import annotations

import socket
import struct
import threading

from datafarm.harness import sandbox
from datafarm.harness.sandbox.docker_provider import DockerProvider, demux_stream


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def test_demux_splits_stdout_and_stderr_across_partial_reads():
    left, right = socket.socketpair()
    wire = frame(1, b"hello ") + frame(2, b"warning\n") + frame(1, b"") + frame(1, b"world\n" * 5000)

    def send() -> None:
        # Dribble the bytes so headers and payloads arrive split at odd places.
        for i in range(0, len(wire), 7777):
            left.sendall(wire[i : i + 7777])
        left.close()

    sender = threading.Thread(target=send)
    sender.start()
    out, err = bytearray(), bytearray()
    demux_stream(lambda n: right.recv(min(n, 3000)), out.extend, err.extend)
    sender.join()
    right.close()
    assert bytes(out) == b"hello " + b"world\n" * 5000
    assert bytes(err) == b"warning\n"


def test_demux_stops_at_a_truncated_frame():
    left, right = socket.socketpair()
    left.sendall(frame(1, b"complete") + frame(1, b"cut off")[:-3])
    left.close()
    out = bytearray()
    demux_stream(right.recv, out.extend, lambda _: None)
    right.close()
    assert bytes(out) == b"complete"


def test_without_an_engine_the_reason_names_the_address():
    provider = DockerProvider(base_url="unix:///nonexistent/docker.sock")
    status = provider.availability()
    assert not status.available and status.isolated
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in status.reason
    assert sandbox.available()["docker"].reason  # the registry reports a reason either way
