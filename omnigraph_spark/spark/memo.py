"""A memo shared by the load-wide checks (in memory and distributed)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future


class Once:
    """A thread-safe memo: the first caller of a key computes it, concurrent callers wait for
    that result (or its error) instead of computing it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[object, Future] = {}

    def __call__(self, key: object, compute: Callable[[], object]):
        with self._lock:
            fut = self._futures.get(key)
            mine = fut is None
            if fut is None:
                fut = self._futures[key] = Future()
        if mine:
            try:
                fut.set_result(compute())
            except BaseException as e:
                fut.set_exception(e)
        return fut.result()
