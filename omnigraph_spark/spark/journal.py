"""The staging journal of a load: which data files its tasks staged, so nothing is left behind.

Each task attempt of a load records the data files it staged under the graph root's staging area
(``_omnigraph_spark/staging/<load>/``) before its result reaches the driver; the driver deletes
every journaled file its commit does not reference (failed and speculative attempts, a failed
load), then the journal. A killed driver's journal is reclaimed by ``cleanup`` (I10).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..graph import Graph
from ..store import side_files
from ..store import tables as _tables
from ..store.fs import RootStorage
from ..store.layout import RootPaths, join
from ..store.writes import StagedTable, discard_staged_files

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Journal:
    """Where the tasks of one load record their staged files. Picklable (sent to executors)."""

    root: str
    directory: str
    storage: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in reprs

    @classmethod
    def new(cls, graph: Graph) -> Journal:
        d = join(RootPaths(graph.root).staging_dir, uuid.uuid4().hex)
        return cls(graph.root, d, tuple(sorted((graph.storage_options or {}).items())))

    def _fs(self) -> RootStorage:
        return RootStorage(self.root, dict(self.storage) or None)

    def record(self, name: str, staged: Sequence[StagedTable]) -> None:
        """Executor: durably note the data files one task attempt staged.

        Plain JSON (directory + file names), never pickle: the driver must not execute
        anything a writer of the graph root could plant."""
        entry = [
            {
                "table_key": s.table_key,
                "stage_uri": s.stage_uri,
                "files": [df.path for f in s.fragments for df in f.files],
            }
            for s in staged
        ]
        self._fs().write_text(join(self.directory, f"{name}-{uuid.uuid4().hex[:8]}.json"), json.dumps(entry))

    def entries(self) -> list[dict]:
        """Driver: every journaled ``{table_key, stage_uri, files}`` so far."""
        fs = self._fs()
        out: list[dict] = []
        for name in fs.list_dir(self.directory):
            path = join(self.directory, name)
            try:
                if name.endswith(".json"):
                    out.extend(json.loads(fs.read_text(path)))
                elif side_files.is_entry(name):  # a JVM task's entry on an object store (a Lance file)
                    out.extend(json.loads(side_files.read_text(path, dict(self.storage) or None)))
                # anything else: the JVM tasks' key fingerprints, the sink's hand-off
            except Exception as e:  # a half-written entry: its files are caught by cleanup
                log.warning("unreadable staging journal entry %s: %s", name, e)
        return out

    def clean(self, keep: Sequence[StagedTable]) -> int:
        """Driver: delete journaled files not in ``keep``, then the journal. Returns files removed."""
        kept = {u for s in keep for u in _tables.data_file_uris(s.stage_uri, s.fragments)}
        n = 0
        for e in self.entries():
            uri = str(e["stage_uri"]).rstrip("/")
            if not uri.startswith(self.root.rstrip("/") + "/"):
                log.warning("ignoring journal entry outside the graph root: %s", uri)
                continue
            gone = [p for p in e["files"] if f"{uri}/data/{p}" not in kept]
            n += discard_staged_files(uri, gone, dict(self.storage) or None, what=e.get("table_key", ""))
        fs = self._fs()
        for name in fs.list_dir(self.directory):
            fs.delete(join(self.directory, name))
        try:
            if "://" not in self.directory and os.path.isdir(self.directory):
                os.rmdir(self.directory)
        except OSError:
            pass
        return n


__all__ = ["Journal"]
