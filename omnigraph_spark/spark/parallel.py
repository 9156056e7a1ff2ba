"""Running the load-wide checks concurrently, in memory and as Spark jobs alike."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor


def run_checks(checks: Sequence[Callable[[], None]], max_workers: int | None = None) -> None:
    """Run independent load-wide checks concurrently (pyarrow kernels release the GIL) and raise
    the error the FIRST failing check in ``checks`` order raises, exactly as running them one by
    one would: a load with several problems always reports the same one."""
    workers = min(len(checks), max_workers or min(4, os.cpu_count() or 1))
    if workers <= 1:
        for check in checks:
            check()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="omnigraph-validate") as pool:
        futures = [pool.submit(check) for check in checks]
        try:
            for f in futures:
                f.result()
        except BaseException:
            for f in futures:
                f.cancel()
            raise


__all__ = ["run_checks"]
