"""Start sandbox processes from one long-lived thread.

bwrap's `--die-with-parent` (PR_SET_PDEATHSIG) fires when the *thread* that forked bwrap exits,
not the process: a sandbox launched from a short-lived worker thread was killed (measured: bwrap
died at once while the program, still in setup, lived on). Forking every sandbox from a daemon
thread that lives as long as the harness process keeps the intended meaning: the sandbox dies
when the harness dies, and only then.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_jobs: queue.SimpleQueue[tuple[Callable[[], object], Future]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        job, future = _jobs.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(job())
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            future.set_exception(error)


def on_launcher_thread(job: Callable[[], T]) -> T:
    """Run `job` (typically a `subprocess.Popen(...)`) on the launcher thread; its result or
    exception is the caller's."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="sandbox-launcher", daemon=True)
            _thread.start()
    if threading.current_thread() is _thread:
        return job()
    future: Future = Future()
    _jobs.put((job, future))
    return future.result()
