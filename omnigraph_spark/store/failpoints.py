"""Failpoints: stop the driver at a named step of the write protocol (reliability tests).

Set ``OMNIGRAPH_SPARK_FAILPOINT`` to ``<step>`` or ``<step>:<action>``; several separated by
commas. Actions: ``exit`` (default: ``os._exit(137)``, a crash with no cleanup), ``kill``
(SIGKILL to self), ``raise`` (FailpointError, to test in-process abort paths). Steps are listed
in ``STEPS`` and in docs/guarantees.md. Read from the environment at each step (no module
state), so a test sets it in a subprocess only.
"""

from __future__ import annotations

import logging
import os
import signal

from ..errors import FailpointError

ENV = "OMNIGRAPH_SPARK_FAILPOINT"
log = logging.getLogger(__name__)

STEPS = (
    "before_sidecar",  # staged files exist, nothing else
    "after_sidecar",  # sidecar durable, no table committed
    "after_table_commit",  # after EACH table commit (use after_table_commit#N for the N-th, 1-based)
    "after_all_commits",  # every table committed, manifest not published
    "after_publish",  # manifest published, no commit row
    "after_commit_row",  # commit row appended, sidecar still present
    "before_sidecar_delete",  # alias point just before the sidecar delete
    "after_optimize_compact",  # optimize: compaction committed, not published
    "before_quarantine_publish",  # rejectedRowsPath: graph commit done, rejected rows still in _staging
    "after_quarantine_move",  # rejectedRowsPath: load=<id>/ in place, no _SUCCESS yet
)


def hit(step: str, n: int = 0) -> None:
    """Crash here if the environment asks for ``step`` (or ``step#n``)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    for item in spec.split(","):
        name, _, action = item.strip().partition(":")
        if name == step or (n and name == f"{step}#{n}"):
            action = action or "exit"
            log.warning("failpoint %s hit (action %s)", name, action)
            if action == "raise":
                raise FailpointError(f"failpoint {name} hit", step=name)
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(137)
