"""A trace file stored gzip-compressed: ``NAME.gz`` holds what ``NAME`` would (format 2).

The large generated files of a trace (graph snapshots, Inductor's IR, a compile's shapes and
record, provenance) are JSON and text that compress ten to twenty times; they are written as
``NAME.gz`` and the trace keeps naming them ``NAME`` (a stage entry's ``file``, the readers'
paths): the reader reads ``NAME`` when it exists, else ``NAME.gz`` (``tracefiles``).

- ``pack`` — the same text gives the same bytes (mtime 0, one level, one member): two traces
  holding one snapshot still hold one file's bytes (``GraphRecord.same_file``, a job's dedup).
  Its last ``MARKED`` bytes of content follow a full flush (a sync marker, the dictionary
  reset), so that ``tail`` reads them from the file's end without decompressing the rest.
- ``inflate`` — decompression of untrusted bytes with the *decompressed* size capped as the
  plain file's would be: a decompression bomb stops at the cap, one byte past it, and is
  refused by name (``safefile.Refused``); a stream cut short, damaged, or followed by other
  bytes is ``ValueError`` (reported as corrupt, like broken JSON).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO
from pathlib import Path

from tuidebug.trace.format import safefile
from tuidebug.trace.format.safefile import Refused

SUFFIX = ".gz"
LEVEL = 1  # the fastest level: 12x on a snapshot, 0.1 s of CPU per 30 MB written
_GZIP = 31  # zlib's window bits for a gzip header and trailer


MARKED = 64  # the last bytes of content packed after a full flush, readable on their own
_SYNC = b"\x00\x00\xff\xff"  # the empty stored block a full flush ends with


def pack(data: bytes) -> bytes:
    """``data`` as one gzip member, the same bytes for the same data; its last ``MARKED``
    bytes after a full flush (``tail`` reads them alone)."""
    c = zlib.compressobj(LEVEL, zlib.DEFLATED, _GZIP)
    cut = max(0, len(data) - MARKED)
    return (c.compress(data[:cut]) + c.flush(zlib.Z_FULL_FLUSH) + c.compress(data[cut:])
            + c.flush())


def inflate(data: bytes, cap: int, *, truncate: bool = False) -> tuple[bytes, bool]:
    """(what ``data`` decompresses to, whether it was cut at ``cap``). More than ``cap`` bytes:
    ``Refused``, or with ``truncate`` the first ``cap`` (never more is decompressed)."""
    d = zlib.decompressobj(_GZIP)
    try:
        out = d.decompress(data, cap + 1)
    except zlib.error as e:
        raise ValueError(f"damaged compressed data ({e})") from None
    if len(out) > cap:
        if not truncate:
            raise Refused(f"decompresses to over the {cap:,}-byte limit for this file "
                          "(a decompression bomb?); not read")
        return out[:cap], True
    if not d.eof:
        raise ValueError("compressed data cut short")
    if d.unused_data:
        raise ValueError("bytes after the compressed data")
    return out, False


_CHUNK = 1 << 20  # compressed bytes read at a time from a file


def _pieces(real: Path, cap: int, *, no_link: bool = False) -> Iterator[bytes]:
    """The content of the gzip file ``real`` decompressed, in pieces, read from the file as it
    is decompressed: it stops one byte past ``cap`` (the caller sees that), so neither the
    compressed nor the decompressed whole is held when only a head is wanted. A stream cut
    short, damaged or followed by other bytes is ``ValueError`` (after the pieces before it);
    more compressed bytes than ``cap`` of content may take (empty blocks) is ``Refused``."""
    d = zlib.decompressobj(_GZIP)
    most_in = cap + cap // 64 + 1024  # deflate stores incompressible data with ~0.03% more
    read = out = 0
    pending, ended = b"", False
    with safefile.open_regular(real, no_link=no_link) as f:
        while not d.eof:
            if not pending and not ended:
                pending = f.read(_CHUNK)
                ended = not pending
                read += len(pending)
            try:  # at the file's end, what the decompressor still holds comes out
                piece = d.decompress(pending, cap + 1 - out)
            except zlib.error as e:
                raise ValueError(f"damaged compressed data ({e})") from None
            pending = d.unconsumed_tail
            if read - len(pending) > most_in:
                raise Refused(f"over {most_in:,} compressed bytes for at most {cap:,} of "
                              "content; not read")
            out += len(piece)
            if piece:
                yield piece
            if out > cap:
                return
            if ended and not piece and not d.eof:
                raise ValueError("compressed data cut short")
        if d.unused_data or pending or f.read(1):
            raise ValueError("bytes after the compressed data")


def inflate_file(real: Path, cap: int, *, truncate: bool = False, no_link: bool = False
                 ) -> tuple[bytes, bool]:
    """``inflate`` of the gzip file ``real`` (``safefile``'s rules: a regular file), read and
    decompressed as a stream: with ``truncate`` only what the first ``cap`` bytes of content
    take is read, however large the file."""
    parts, got = [], 0
    for piece in _pieces(real, cap, no_link=no_link):
        parts.append(piece)
        got += len(piece)
    data = b"".join(parts)
    if got > cap:
        if not truncate:
            raise Refused(f"decompresses to over the {cap:,}-byte limit for this file "
                          "(a decompression bomb?); not read")
        return data[:cap], True
    return data, False


def tail(real: Path, cap: int, size: int = MARKED) -> bytes | None:
    """The last bytes (at most ``size``, ``MARKED`` at most where read from the end) of the
    content of the gzip file ``real``; None where that is not known without reading more than
    ``cap`` bytes of content (how much it holds is told when it is read). ``ValueError``: cut
    short or damaged. A file ``pack`` wrote is peeked at, as a plain file is: its head
    decompressed (a damaged start, a first member ending there) and its last ``MARKED`` bytes
    of content read from the end (``_marked_tail``), whatever its size: the trailer's length
    (ISIZE) is not read for it, a crafted file sets it to anything and it wraps at 4 GiB, and a
    plain file's size is told when it is read too. Any other file (an older trace's), or one
    whose peek finds anything amiss, is decompressed as a stream to its end and dropped as it
    goes."""
    with safefile.open_regular(real) as f:
        stored = os.fstat(f.fileno()).st_size
        if stored > cap + cap // 64 + 1024:
            return None  # more than any content within the cap takes (refused when read)
        quick = _marked_tail(f, stored)
    if quick is not None:
        return quick[-size:]
    last, got = b"", 0
    for piece in _pieces(real, cap):
        last = (last + piece[-size:])[-size:]
        got += len(piece)
    return None if got > cap else last


_PEEK = 1 << 16  # compressed bytes read at either end of a file for the quick check


def _marked_tail(f: BinaryIO, stored: int) -> bytes | None:
    """``pack``'s last ``MARKED`` bytes of content, read from the end of the open gzip file
    ``f`` (``stored`` bytes): after the last sync marker, the rest of the stream decompressed
    on its own must end the stream and be followed by exactly the 8-byte trailer (CRC32,
    length: neither can be checked without the whole content, neither is used); its head
    must decompress and not end the stream (a first member ending there, followed by more).
    None where anything is amiss or the file was not written so (the caller reads it all)."""
    if stored <= 2 * _PEEK:
        return None  # a small file: read whole, it says all
    head = zlib.decompressobj(_GZIP)
    try:
        head.decompress(f.read(_PEEK), 1 << 16)
    except zlib.error:
        return None
    if head.eof:
        return None  # one member ends within the head and more bytes follow: read, it says so
    f.seek(max(0, stored - 256))
    end = f.read()
    at = len(end)
    while (at := end.rfind(_SYNC, 0, at)) >= 0:
        try:
            r = zlib.decompressobj(-15)
            out = r.decompress(end[at + 4:], MARKED + 1)
        except zlib.error:
            continue
        if r.eof and len(r.unused_data) == 8 and len(out) <= MARKED:
            return out
    return None


def packed_name(name: str) -> str:
    """The file that holds ``name`` compressed."""
    return name + SUFFIX


def logical_name(name: str) -> str:
    """The name a trace gives the file ``name`` (``NAME.gz`` -> ``NAME``)."""
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else name


def read_bytes(path: Path, cap: int, *, no_link: bool = False) -> bytes:
    """The content of ``path``, else of ``path.gz`` decompressed (``safefile.read_bytes``'s
    rules, ``cap`` on the decompressed size too): for a reader that is not a ``Trace`` (a job's
    rank digests, an importer reading back what it wrote). ``Refused``, ``OSError``,
    ``ValueError`` (damaged)."""
    if os.path.lexists(path):
        return safefile.read_bytes(path, cap, no_link=no_link)[0]
    return inflate_file(path.with_name(packed_name(path.name)), cap, no_link=no_link)[0]
