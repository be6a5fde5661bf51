"""A bundle file's trailer: file = body + TRAILER_MAGIC + xxh3-128(body), the body being the flatbuffer
and (format 4) the sections after it: the digest covers every byte before the trailer.

Apart from bundle.py (dataclasses, the flatbuffer reader) so that the compile cache's fast path can
check a file's digest with nothing but xxhash.  Works on bytes and on memory maps alike.
"""
from __future__ import annotations

import xxhash

TRAILER_MAGIC = b"GPUCSUM1"
TRAILER_BYTES = 24


def claimed_digest(data) -> bytes | None:
    """The digest a file's trailer claims, or None when the file has no trailer."""
    n = len(data) - TRAILER_BYTES
    if n < 8 or bytes(data[n:n + 8]) != TRAILER_MAGIC:
        return None
    return bytes(data[n + 8:])


def digest_ok(data) -> bool:
    """The file ends in a trailer whose digest is that of the body before it (one hash)."""
    claimed = claimed_digest(data)
    if claimed is None:
        return False
    with memoryview(data) as whole, whole[:len(data) - TRAILER_BYTES] as body:
        return xxhash.xxh3_128_digest(body) == claimed


def with_trailer(body: bytes) -> bytes:
    return body + TRAILER_MAGIC + xxhash.xxh3_128_digest(body)


def trailer_of(parts) -> bytes:
    """The trailer of a body given in parts (buffers, concatenated in order): no joined copy."""
    h = xxhash.xxh3_128()
    for p in parts:
        h.update(p)
    return TRAILER_MAGIC + h.digest()
