"""The engine's FNV-1a hashes: 32-bit for type/property ids, 64-bit for dataset directories.

Why FNV-1a by hand: ids and directory names are part of the on-disk contract, so they must be
bit-exact with the engine (``stable_type_id``/``stable_prop_id`` and ``type_name_hash``).
"""

from __future__ import annotations

from ..errors import UnknownTypeError

_FNV32_OFFSET = 2166136261
_FNV32_PRIME = 16777619
_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def fnv1a_32(s: str) -> int:
    """FNV-1a-32 over the UTF-8 bytes; 0 is replaced by 1 (the engine reserves 0)."""
    h = _FNV32_OFFSET
    for b in s.encode("utf-8"):
        h = ((h ^ b) * _FNV32_PRIME) & _MASK32
    return h or 1


def fnv1a_64(s: str) -> int:
    """Plain FNV-1a-64 over the UTF-8 bytes (no zero substitution)."""
    h = _FNV64_OFFSET
    for b in s.encode("utf-8"):
        h = ((h ^ b) * _FNV64_PRIME) & _MASK64
    return h


def fnv1a_64_hex(name: str) -> str:
    """16 lowercase hex digits: the dataset directory name of a bare type name."""
    return f"{fnv1a_64(name):016x}"


def type_id(kind: str, name: str) -> int:
    """``kind`` is "node", "edge" or "interface"."""
    return fnv1a_32(f"{kind}:{name}")


def prop_id(kind: str, owner: str, prop: str) -> int:
    return fnv1a_32(f"{kind}:{owner}:{prop}")


def dataset_path(table_key: str) -> str:
    """``node:Person`` -> ``nodes/<hash>``, ``edge:Knows`` -> ``edges/<hash>``."""
    kind, _, name = table_key.partition(":")
    if kind not in ("node", "edge") or not name:
        raise UnknownTypeError(f"table key must be 'node:<Name>' or 'edge:<Name>', got {table_key!r}", type=table_key)
    return f"{kind}s/{fnv1a_64_hex(name)}"
