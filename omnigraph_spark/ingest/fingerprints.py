"""Key fingerprints: 64 bits per value of a column whose values must be distinct over a load.

A staging task fingerprints the values it stages of a node type's only uniqueness rule when that
rule is one String / I32 / I64 column (:func:`fingerprint_column`); the driver then proves the
load's values distinct by finding no two equal fingerprints, and skips its exact pass
(invariant I15). Equal values always have equal fingerprints; equal fingerprints prove nothing
(the exact check then decides and words any error).

A string's fingerprint is the 64-bit hash of its UTF-8 bytes that the JVM shim computes
(``NodeIdIndex.hash``: 8-byte little-endian words, a multiply-xorshift mix per word and at the
end); an integer's is the value itself (as a two's-complement 64-bit pattern). So a table's
fingerprints mean the same whichever path staged it. Computed here with numpy over the Arrow
buffers, a whole column at a time: one vectorised step per 8-byte word position.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.types as pt

from .checks import unique_groups

#: stored types whose values are fingerprinted (strings hashed, integers as themselves)
FINGERPRINTED = (pa.string(), pa.int32(), pa.int64())

_SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def fingerprint_column(typedef, schema: pa.Schema) -> str | None:
    """The column whose uniqueness staging tasks can prove with fingerprints: a node type's
    only uniqueness rule, on one String/I32/I64 column of ``schema`` (a single-column @key or
    @unique); None otherwise (the driver checks exactly)."""
    groups = unique_groups(typedef)
    if typedef.is_edge or len(groups) != 1 or len(groups[0][0]) != 1:
        return None
    column = groups[0][0][0]
    return column if schema.field(column).type in FINGERPRINTED else None


def fingerprints(values) -> np.ndarray:
    """The fingerprints of the non-null values of ``values`` (an Arrow string or integer array,
    chunked or not), in their order, as unsigned 64-bit integers."""
    if isinstance(values, pa.ChunkedArray):
        parts = [fingerprints(c) for c in values.chunks]
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)
    values = values.drop_null() if values.null_count else values
    t = values.type
    if pt.is_integer(t):
        return np.asarray(values.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64).view(np.uint64)
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_binary(t) or pt.is_large_binary(t):
        return _string_hashes(values)
    raise TypeError(f"no fingerprint for values of type {t}")


def _string_hashes(values: pa.Array) -> np.ndarray:
    n = len(values)
    if n == 0:
        return np.empty(0, np.uint64)
    wide = pt.is_large_string(values.type) or pt.is_large_binary(values.type)
    _, off_buf, data_buf = values.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64 if wide else np.int32)[values.offset : values.offset + n + 1]
    starts = offsets[:-1].astype(np.int64)
    lens = np.diff(offsets).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    # the values' bytes, 8 zero bytes after them: every 8-byte read below stays inside
    padded = np.zeros(hi - lo + 8, np.uint8)
    if data_buf is not None and hi > lo:
        padded[: hi - lo] = np.frombuffer(data_buf, np.uint8)[lo:hi]
    starts -= lo
    # the little-endian 8-byte word that starts at each byte position (an unaligned view)
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    full = lens >> 3
    h = _SEED ^ lens.astype(np.uint64)
    top = int(full.max())
    order = None
    if top and int(full.min()) == top:  # every value has the same number of full words (fixed-width keys)
        for k in range(top):
            x = h ^ words[starts + 8 * k]
            x *= _M1
            x ^= x >> np.uint64(31)
            h = x
    elif top:
        # the values by number of full words, most first: word k mixes into a prefix of them
        order = np.argsort(-full, kind="stable")
        h, starts, lens, full = h[order], starts[order], lens[order], full[order]
        neg = -full
        for k in range(top):
            m = int(np.searchsorted(neg, -k, side="left"))  # how many have more than k full words
            x = h[:m] ^ words[starts[:m] + 8 * k]
            x *= _M1
            x ^= x >> np.uint64(31)
            h[:m] = x
    rem = (lens & 7).astype(np.uint64)
    tail = words[starts + (full << 3)] & ((np.uint64(1) << (rem << np.uint64(3))) - np.uint64(1))
    h ^= tail
    h *= _M2
    h ^= h >> np.uint64(29)
    h *= _M1
    h ^= h >> np.uint64(32)
    if order is None:
        return h
    out = np.empty_like(h)
    out[order] = h
    return out


def sorted_fingerprints(values) -> np.ndarray:
    """:func:`fingerprints` in ascending (unsigned) order: the side file's order."""
    out = fingerprints(values)
    out.sort()
    return out


__all__ = ["FINGERPRINTED", "fingerprint_column", "fingerprints", "sorted_fingerprints"]
