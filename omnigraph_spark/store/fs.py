"""Small-file storage for the graph root: schema files, sidecars, lease and txn records.

Lance handles the datasets; this handles the few JSON/text files around them. Local paths use
the OS (atomic rename; create-if-absent by hard link of a complete temp file); object stores go
through pyarrow.fs, where a single PUT is atomic but create-if-absent is check-then-put
(documented in docs/format.md).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid

import pyarrow.fs as pafs

from ..errors import StorageError
from .layout import is_local


class RootStorage:
    """Text-file operations relative to nothing: every method takes a full path or URI."""

    def __init__(self, root: str, storage_options: dict[str, str] | None = None) -> None:
        self.root = root
        self.local = is_local(root)
        self.storage_options = dict(storage_options or {})
        self._fs = None

    # -- object store plumbing --------------------------------------------------------
    def _pafs(self):
        if self._fs is None:
            opts = self.storage_options
            if self.root.startswith("s3://"):
                kw = {}
                if "aws_access_key_id" in opts:
                    kw["access_key"] = opts["aws_access_key_id"]
                if "aws_secret_access_key" in opts:
                    kw["secret_key"] = opts["aws_secret_access_key"]
                if "aws_session_token" in opts:
                    kw["session_token"] = opts["aws_session_token"]
                if "aws_region" in opts or "region" in opts:
                    kw["region"] = opts.get("aws_region") or opts.get("region")  # type: ignore[assignment]  # one of the two keys is present
                # Lance reads an endpoint from the environment (AWS_ENDPOINT_URL / AWS_ENDPOINT);
                # pyarrow does not, so the small files would go to AWS while the tables go to
                # the S3-compatible server the environment names
                ep = (
                    opts.get("aws_endpoint")
                    or opts.get("endpoint")
                    or os.environ.get("AWS_ENDPOINT_URL")
                    or os.environ.get("AWS_ENDPOINT")
                )
                if ep:
                    kw["endpoint_override"] = ep
                    if ep.startswith("http://"):
                        kw["scheme"] = "http"
                self._fs = pafs.S3FileSystem(**kw)
            else:
                self._fs, _ = pafs.FileSystem.from_uri(self.root)
        return self._fs

    @staticmethod
    def _strip(uri: str) -> str:
        return uri.split("://", 1)[1] if "://" in uri else uri

    # -- operations ---------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        try:
            if self.local:
                return os.path.exists(path)

            return self._pafs().get_file_info(self._strip(path)).type != pafs.FileType.NotFound
        except OSError as e:
            raise StorageError(f"cannot stat '{path}': {e}", path=path) from e

    def read_text(self, path: str) -> str:
        try:
            if self.local:
                with open(path, encoding="utf-8") as f:
                    return f.read()
            with self._pafs().open_input_stream(self._strip(path)) as f:
                return f.read().decode("utf-8")
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read '{path}': {e}", path=path) from e

    def read_bytes(self, path: str) -> bytes:
        try:
            if self.local:
                with open(path, "rb") as f:
                    return f.read()
            with self._pafs().open_input_stream(self._strip(path)) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read '{path}': {e}", path=path) from e

    def write_text(self, path: str, text: str) -> None:
        """Atomic replace: temp file + rename locally, a single PUT on object stores."""
        try:
            if self.local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = _temp_name(path)
                _write_synced(tmp, text)
                os.replace(tmp, path)
                return
            with self._pafs().open_output_stream(self._strip(path)) as f:
                f.write(text.encode("utf-8"))
        except OSError as e:
            raise StorageError(f"cannot write '{path}': {e}", path=path) from e

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` to a new file at ``path`` (one PUT on object stores)."""
        try:
            if self.local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
                return
            with self._pafs().open_output_stream(self._strip(path)) as f:
                f.write(data)
        except OSError as e:
            raise StorageError(f"cannot write '{path}': {e}", path=path) from e

    def create_text(self, path: str, text: str) -> bool:
        """Create ``path`` only if absent. Returns False if it already existed.

        Atomic on local roots (a hard link). On object stores it is check-then-put: a caller that
        can race another writer holds the commit lease around it (``Graph.init``, I14)."""
        try:
            if self.local:
                # Write a private temp file, then hard-link it into place: the link either fails
                # (already there) or publishes the whole content at once. An O_EXCL create would
                # expose an empty file to a concurrent reader between create and write.
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = _temp_name(path)
                _write_synced(tmp, text)
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
                except OSError:  # no hard links here (some FUSE mounts): O_EXCL create, then write
                    try:  # a reader can briefly see it empty (the lease allows for that)
                        _write_synced(path, text, exclusive=True)
                    except FileExistsError:
                        return False
                finally:
                    os.remove(tmp)
                return True
            if self.exists(path):
                return False
            self.write_text(path, text)
            return True
        except OSError as e:
            raise StorageError(f"cannot create '{path}': {e}", path=path) from e

    def delete(self, path: str) -> bool:
        try:
            if self.local:
                try:
                    os.remove(path)
                    return True
                except FileNotFoundError:
                    return False
            if not self.exists(path):
                return False
            self._pafs().delete_file(self._strip(path))
            return True
        except OSError as e:
            raise StorageError(f"cannot delete '{path}': {e}", path=path) from e

    def list_dir(self, path: str) -> list[str]:
        """Names (not paths) of the files directly in ``path``; [] if it does not exist."""
        try:
            if self.local:
                if not os.path.isdir(path):
                    return []
                return sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))

            sel = pafs.FileSelector(self._strip(path), allow_not_found=True)
            return sorted(i.base_name for i in self._pafs().get_file_info(sel) if i.type == pafs.FileType.File)
        except OSError as e:
            raise StorageError(f"cannot list '{path}': {e}", path=path) from e

    def list_subdirs(self, path: str) -> list[str]:
        """Names of the directories (object-store prefixes) directly in ``path``; [] if none."""
        try:
            if self.local:
                if not os.path.isdir(path):
                    return []
                return sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)))
            sel = pafs.FileSelector(self._strip(path), allow_not_found=True)
            return sorted(i.base_name for i in self._pafs().get_file_info(sel) if i.type == pafs.FileType.Directory)
        except OSError as e:
            raise StorageError(f"cannot list '{path}': {e}", path=path) from e

    def delete_tree(self, path: str) -> None:
        """Delete ``path`` and everything below it (a directory, or every object under a prefix)."""
        try:
            if self.local:
                shutil.rmtree(path, ignore_errors=False)
                return
            self._pafs().delete_dir(self._strip(path).rstrip("/"))
        except FileNotFoundError:
            return
        except OSError as e:
            raise StorageError(f"cannot delete '{path}': {e}", path=path) from e

    def list_tree(self, path: str) -> list[str]:
        """Every file below ``path`` as a path relative to it."""
        if self.local:
            out = []
            for d, _, files in os.walk(path):
                for n in files:
                    out.append(os.path.relpath(os.path.join(d, n), path))
            return sorted(out)

        base = self._strip(path).rstrip("/")
        sel = pafs.FileSelector(base, allow_not_found=True, recursive=True)
        return sorted(i.path[len(base) + 1 :] for i in self._pafs().get_file_info(sel) if i.type == pafs.FileType.File)

    def size(self, path: str) -> int:
        if self.local:
            return os.path.getsize(path)
        return self._pafs().get_file_info(self._strip(path)).size

    def age_s(self, path: str) -> float | None:
        """Seconds since ``path`` was last modified, or None when the store does not say."""
        if self.local:
            return time.time() - os.path.getmtime(path)
        mtime = self._pafs().get_file_info(self._strip(path)).mtime
        return None if mtime is None else time.time() - mtime.timestamp()


def _temp_name(path: str) -> str:
    return f"{path}.{uuid.uuid4().hex}.tmp"


def _write_synced(path: str, text: str, *, exclusive: bool = False) -> None:
    """Write ``text`` to a local file and fsync it; ``exclusive`` fails if it exists (O_EXCL)."""
    with open(path, "x" if exclusive else "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
