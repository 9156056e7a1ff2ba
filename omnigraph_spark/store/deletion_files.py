"""A Lance fragment's deletion vector, read from its deletion file alone.

A fragment's metadata names its deletion file (``_deletions/{fragment}-{read_version}-{id}``,
under the base its ``base_id`` names, else under the dataset itself). Lance writes a new file for
every change and never rewrites one in place, so the file a version names is that version's set
of deleted physical offsets. Two forms exist (Lance picks by size):

- ``array`` (``.arrow``): an Arrow IPC file of one ``UInt32`` column of offsets;
- ``bitmap`` (``.bin``): a 32-bit roaring bitmap in the portable serialisation
  (https://github.com/RoaringBitmap/RoaringFormatSpec), decoded by :func:`decode_roaring`.

The change feed uses these to find the rows one version deleted from a fragment in time
proportional to the fragment's deletions, not to its rows (docs/change_feed.md, I25).
"""

from __future__ import annotations

import logging

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from ..errors import CorruptGraphError
from .fs import RootStorage

log = logging.getLogger(__name__)

_COOKIE_RUNS = 12347
_COOKIE_NO_RUNS = 12346
#: from this many containers on, a serialisation with run containers carries the offset header
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096
_BITMAP_BYTES = 8192
_FRAGMENT_MASK = (1 << 32) - 1


def _u16(buf: bytes, count: int, pos: int, what: str) -> np.ndarray:
    if pos + 2 * count > len(buf):
        raise CorruptGraphError(f"roaring bitmap: {what} runs past the end ({len(buf)} bytes)")
    return np.frombuffer(buf, "<u2", count, pos)


def decode_roaring(buf: bytes) -> np.ndarray:
    """The sorted ``uint32`` values of a 32-bit roaring bitmap in the portable format.

    Raises:
        CorruptGraphError: the bytes are not a complete portable roaring bitmap.
    """
    if len(buf) < 4:
        raise CorruptGraphError(f"roaring bitmap: {len(buf)} bytes, no cookie")
    cookie = int.from_bytes(buf[:4], "little")
    pos = 4
    if cookie & 0xFFFF == _COOKIE_RUNS:
        n = (cookie >> 16) + 1
        nbytes = (n + 7) // 8
        if pos + nbytes > len(buf):
            raise CorruptGraphError("roaring bitmap: run flags run past the end")
        runs = np.unpackbits(np.frombuffer(buf, np.uint8, nbytes, pos), bitorder="little")[:n].astype(bool)
        pos += nbytes
        offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _COOKIE_NO_RUNS:
        if len(buf) < 8:
            raise CorruptGraphError("roaring bitmap: no container count")
        n = int.from_bytes(buf[4:8], "little")
        pos = 8
        runs = np.zeros(n, bool)
        offsets = True
    else:
        raise CorruptGraphError(f"roaring bitmap: unknown cookie {cookie:#x}")
    header = _u16(buf, 2 * n, pos, "container header").reshape(n, 2)
    pos += 4 * n
    if offsets:
        pos += 4 * n
    parts: list[np.ndarray] = []
    for i in range(n):
        high = np.uint32(int(header[i, 0]) << 16)
        card = int(header[i, 1]) + 1
        if runs[i]:
            nruns = int(_u16(buf, 1, pos, "run count")[0])
            pos += 2
            pairs = _u16(buf, 2 * nruns, pos, "runs").reshape(nruns, 2).astype(np.uint32)
            pos += 4 * nruns
            low = (
                np.concatenate([np.arange(s, s + n_ + 1, dtype=np.uint32) for s, n_ in pairs])
                if nruns
                else np.empty(0, np.uint32)
            )
        elif card <= _ARRAY_MAX:
            low = _u16(buf, card, pos, "array container").astype(np.uint32)
            pos += 2 * card
        else:
            if pos + _BITMAP_BYTES > len(buf):
                raise CorruptGraphError("roaring bitmap: bitmap container runs past the end")
            bits = np.unpackbits(np.frombuffer(buf, np.uint8, _BITMAP_BYTES, pos), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            pos += _BITMAP_BYTES
        if len(low) != card:
            raise CorruptGraphError(f"roaring bitmap: container {i} holds {len(low)} values, its header says {card}")
        parts.append(high | low)
    out = np.concatenate(parts) if parts else np.empty(0, np.uint32)
    if len(out) > 1 and not bool(np.all(out[1:] > out[:-1])):
        raise CorruptGraphError("roaring bitmap: values are not strictly increasing")
    return out


def _decode_array(buf: bytes) -> np.ndarray:
    try:
        t = ipc.open_file(pa.py_buffer(buf)).read_all()
    except pa.ArrowInvalid as e:
        raise CorruptGraphError(f"deletion file: not an Arrow IPC file ({e})") from e
    if t.num_columns != 1 or not pa.types.is_uint32(t.schema.field(0).type):
        raise CorruptGraphError(f"deletion file: expected one UInt32 column, found {t.schema}")
    return np.unique(t.column(0).combine_chunks().to_numpy(zero_copy_only=False).astype(np.uint32))


def _file_uri(ds: lance.LanceDataset, location: str, fragment_id: int, d) -> str | None:
    """Where a fragment's deletion file lives; None for a base laid out other than a dataset root."""
    rel = d.path(fragment_id)
    if d.base_id is None:
        return f"{location.rstrip('/')}/{rel}"
    bases = ds._ds.base_paths()  # type: ignore[attr-defined]  # the manifest base path table: no public accessor, not in the stubs
    base = bases.get(d.base_id)
    if base is None or not base.is_dataset_root:
        return None
    root = base.path
    if "://" not in root and "://" in ds.uri:
        root = f"{ds.uri.split('://', 1)[0]}://{root.lstrip('/')}"
    return f"{root.rstrip('/')}/{rel}"


def _from_row_addresses(ds: lance.LanceDataset, fragment_id: int) -> np.ndarray:
    """The deleted offsets found by scanning the fragment's row addresses (reads every live row's
    address: the fallback where the deletion file cannot be located)."""
    frag = ds.get_fragment(fragment_id)
    if frag is None:
        raise CorruptGraphError(
            f"fragment {fragment_id} is not in version {ds.version} of '{ds.uri}'", version=ds.version
        )
    addr = frag.to_table(columns=[], with_row_address=True).column("_rowaddr").combine_chunks()
    live = pc.bit_wise_and(addr, pa.scalar(_FRAGMENT_MASK, pa.uint64())).to_numpy().astype(np.uint32)
    return np.setdiff1d(np.arange(frag.metadata.physical_rows, dtype=np.uint32), live, assume_unique=True)


def branch_location(uri: str, branch: str | None) -> str:
    """The directory of a Lance branch's own files (its versions, data and deletion files)."""
    return uri if branch is None else f"{uri.rstrip('/')}/tree/{branch}"


def deleted_offsets(
    ds: lance.LanceDataset, location: str, fragment_id: int, storage: RootStorage | None = None
) -> np.ndarray:
    """The sorted physical offsets deleted from fragment ``fragment_id`` at ``ds``'s version;
    ``location`` is the directory of the Lance branch that holds the version
    (:func:`branch_location`: a checked-out branch version's ``uri`` names the dataset's root);
    ``storage`` reads the file (default: one made for ``location``, without storage options).

    Raises:
        CorruptGraphError: the fragment is not in the version, or its deletion file is malformed
            or disagrees with the fragment metadata's count.
        StorageError / FileNotFoundError: the deletion file cannot be read (cleanup removed it).
    """
    frag = ds.get_fragment(fragment_id)
    if frag is None:
        raise CorruptGraphError(
            f"fragment {fragment_id} is not in version {ds.version} of '{ds.uri}'", version=ds.version
        )
    d = frag.metadata.deletion_file
    if d is None:
        return np.empty(0, np.uint32)
    uri = _file_uri(ds, location, fragment_id, d)
    if uri is None:
        log.info(
            "%s fragment %d: deletion file base %s is not a dataset root: scanning row addresses",
            ds.uri,
            fragment_id,
            d.base_id,
        )
        return _from_row_addresses(ds, fragment_id)
    buf = (storage or RootStorage(location)).read_bytes(uri)
    try:
        out = decode_roaring(buf) if d.file_type == "bitmap" else _decode_array(buf)
    except CorruptGraphError as e:
        raise CorruptGraphError(f"{uri}: {e}", version=ds.version) from e
    if len(out) != int(d.num_deleted_rows):
        raise CorruptGraphError(
            f"{uri}: holds {len(out)} deleted offsets, fragment {fragment_id}'s metadata says {d.num_deleted_rows}",
            version=ds.version,
        )
    return out
