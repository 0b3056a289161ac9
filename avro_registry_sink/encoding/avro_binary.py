"""Vectorized Avro binary encoding: zig-zag varints, byte lengths and two's complement on whole numpy
columns, and the assembler that concatenates each row's parts into one Arrow binary array.

The building blocks of :mod:`avro_registry_sink.encoding.columnar` (see its docstring for how a batch is encoded):

* datums (:class:`Longs`, :class:`Floats`, :class:`Bytes`, :class:`Decimals`, :class:`Bits`): the Avro values of
  one field for the rows of a chunk, as arrays;
* parts (:class:`Word`, :class:`Mat`, :class:`Body`): the bytes one field contributes to each row;
* :func:`assemble`: parts -> one ``binary`` array, row-major, through Arrow binary views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from avro_registry_sink.errors import EncodingError

__all__ = [
    "I32",
    "I64",
    "INLINE",
    "U8",
    "U64",
    "Bits",
    "Body",
    "Bytes",
    "Decimals",
    "Floats",
    "Longs",
    "Mat",
    "Scratch",
    "Word",
    "assemble",
    "be_word",
    "byte_len_signed",
    "byte_len_unsigned",
    "len_varint",
    "sized_bytes",
    "u64",
    "varint",
    "wide_twos",
    "zigzag",
]

INLINE = 12  # Arrow binary views hold up to 12 bytes inline
U8 = np.uint8
I32 = np.int32
I64 = np.int64
U64 = np.uint64

# --------------------------------------------------------------------------------------------------
# Datums: the Avro values of one field for the rows of a chunk, as arrays.


@dataclass
class Longs:
    values: np.ndarray  # int64
    valid: np.ndarray | None  # bool, None = no nulls


@dataclass
class Floats:
    values: np.ndarray  # float32 or float64
    valid: np.ndarray | None


@dataclass
class Bytes:
    views: np.ndarray  # (n, 4) int32: Arrow binary-view structs (length, prefix, buffer index, offset)
    buffers: list[pa.Buffer]  # the views' data buffers
    valid: np.ndarray | None

    @property
    def lens(self) -> np.ndarray:
        lens = self.views[:, 0].astype(I64)
        return lens if self.valid is None else np.where(self.valid, lens, 0)


@dataclass
class Decimals:
    le: np.ndarray | None  # (n, W) uint8 little-endian two's complement, or None when ``small`` is used
    small: np.ndarray | None  # int64 unscaled values when they all fit in 64 bits
    valid: np.ndarray | None


@dataclass
class Bits:
    values: np.ndarray  # uint64
    valid: np.ndarray | None


# --------------------------------------------------------------------------------------------------
# Parts and the assembler.
#
# A part is the bytes one field contributes to each row:
#   Word: up to 16 bytes held in two little-endian uint64 words (lo = bytes 0..7, hi = bytes 8..15),
#          with a per-row (or constant) length; varints, floats, headers, union branches, small decimals.
#   Mat:  longer values as a left-aligned (n, w) byte matrix (decimals above 64 bits).
#   Body: string/bytes payloads as Arrow binary views into the column's own buffers.
# Consecutive words are merged into segments of at most 16 bytes (per-row shifts, no Python per row);
# every segment of every row becomes one binary view, and one Arrow cast concatenates them.


@dataclass
class Word:
    lo: Any  # uint64 array, or a numpy scalar for a constant part
    hi: Any  # uint64 array/scalar, or None when the part never exceeds 8 bytes
    lens: Any  # int64 array, or an int for a fixed width
    width: int  # the longest this part gets (<= 16)


@dataclass
class Mat:
    matrix: np.ndarray
    lens: np.ndarray


@dataclass
class Body:
    views: np.ndarray  # (n, 4) int32 binary views, buffer indexes relative to ``buffers``
    lens: np.ndarray
    buffers: list[pa.Buffer]


_SEGMENT = 16
_SIXTY_FOUR = np.uint64(64)


class _Segment:
    """Words concatenated row by row: bytes 0..15 of each row in (lo, hi)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lo = np.zeros(n, U64)
        self.hi: np.ndarray | None = None
        self.lens: Any = 0
        self.width = 0

    def fits(self, part: Word) -> bool:
        return self.width + part.width <= _SEGMENT

    def add(self, part: Word) -> None:
        shift = self.lens
        if self.width + part.width > 8 and self.hi is None:
            self.hi = np.zeros(self.n, U64)
        if isinstance(shift, int):
            bits = np.uint64(8 * shift)
            if shift + part.width <= 8:
                self.lo |= part.lo << bits
            elif shift >= 8:
                self.hi |= part.lo << np.uint64(8 * (shift - 8))
            else:
                self.lo |= part.lo << bits
                if shift:
                    self.hi |= part.lo >> np.uint64(64 - 8 * shift)
                if part.hi is not None:
                    self.hi |= part.hi << bits
        else:
            bits = shift.astype(U64) << np.uint64(3)
            self.lo |= part.lo << bits
            if self.hi is not None:
                # shifts of 64 or more give 0 in numpy, and uint64 wrap-around makes 64 - bits huge
                # where bits > 64: one of the two terms is the right one for each row
                self.hi |= (part.lo >> (_SIXTY_FOUR - bits)) | (part.lo << (bits - _SIXTY_FOUR))
                if part.hi is not None:
                    self.hi |= part.hi << bits
        self.lens = shift + part.lens
        self.width += part.width


class Scratch:
    """Reusable word buffers for the views of a chunk (fresh pages cost more than the encoding)."""

    def __init__(self) -> None:
        self._buffers = [np.empty(0, U64), np.empty(0, U64)]

    def take(self, slot: int, size: int) -> np.ndarray:
        if self._buffers[slot].size < size:
            self._buffers[slot] = np.empty(size, U64)
        return self._buffers[slot][:size]


def assemble(parts: list[Any], n: int, scratch: Scratch) -> pa.BinaryArray:
    """Rows of concatenated parts -> one BinaryArray, through one binary-view cast."""
    if n == 0:
        return pa.array([], pa.binary())
    segments: list[Any] = []
    current: _Segment | None = None
    for part in parts:
        if isinstance(part, Word):
            if current is not None and not current.fits(part):
                segments.append(current)
                current = None
            if current is None:
                current = _Segment(n)
            current.add(part)
        else:
            if current is not None:
                segments.append(current)
                current = None
            segments.append(part)
    if current is not None:
        segments.append(current)
    count = len(segments)
    # Views are built per segment, contiguous (segment-major), then transposed once to row-major.
    by_segment = scratch.take(0, count * n * 2).reshape(count, n, 2)
    buffers: list[pa.Buffer] = []
    total = 0
    for j, seg in enumerate(segments):
        block = by_segment[j]
        lens = seg.lens
        if isinstance(lens, int):
            total += lens * n
            lens_word: Any = u64(lens)
            long_rows = np.full(n, lens > INLINE) if lens > INLINE else None
        else:
            total += int(lens.sum())
            lens_word = lens.astype(U64)
            long_rows = lens > INLINE if not isinstance(seg, _Segment) or seg.width > INLINE else None
        if isinstance(seg, _Segment):
            lo = seg.lo
            block[:, 0] = lens_word | (lo << u64(32))
            second = lo >> u64(32)
            if seg.hi is not None:
                second |= seg.hi << u64(32)
            if long_rows is not None and long_rows.any():
                store = np.empty((n, 2), U64)
                store[:, 0] = lo
                store[:, 1] = seg.hi if seg.hi is not None else 0
                pointer = u64(len(buffers)) | (np.arange(0, 16 * n, 16, dtype=U64) << u64(32))
                second = np.where(long_rows, pointer, second)
                buffers.append(pa.py_buffer(store))
            block[:, 1] = second
        elif isinstance(seg, Body):
            src = seg.views.view(U64)
            first = src[:, 0]
            if not isinstance(lens, int):
                first = (first & u64(0xFFFFFFFF00000000)) | lens_word  # nulls: length 0
            block[:, 0] = first
            if buffers and seg.buffers:
                block[:, 1] = src[:, 1] + np.where(lens > INLINE, u64(len(buffers)), u64(0))
            else:
                block[:, 1] = src[:, 1]
            buffers.extend(seg.buffers)
        else:  # Mat
            matrix = np.ascontiguousarray(seg.matrix)
            w = matrix.shape[1]
            head = np.zeros((n, 16), U8)
            head[:, 4: 4 + min(w, INLINE)] = matrix[:, :INLINE]
            words = head.view(U64)
            block[:, 0] = words[:, 0] | lens_word
            second = words[:, 1]
            if long_rows is not None and long_rows.any():
                pointer = u64(len(buffers)) | (np.arange(0, w * n, w, dtype=U64) << u64(32))
                second = np.where(long_rows, pointer, second)
                buffers.append(pa.py_buffer(matrix))
            block[:, 1] = second
    if total >= 1 << 31:
        raise EncodingError(f"A chunk's Avro output is {total} bytes, over Arrow binary's 2 GiB; encode smaller batches.")
    views = scratch.take(1, n * count * 2).reshape(n, count, 2)
    np.copyto(views.view("V16").reshape(n, count), by_segment.view("V16").reshape(count, n).T)
    view_array = pa.Array.from_buffers(pa.binary_view(), n * count, [None, pa.py_buffer(views), *buffers])
    flat = view_array.cast(pa.binary())
    offsets = np.frombuffer(flat.buffers()[1], dtype=I32)[: n * count + 1]
    row_offsets = np.ascontiguousarray(offsets[::count])
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(row_offsets), flat.buffers()[2]])


# --------------------------------------------------------------------------------------------------
# Vectorized Avro primitives.


def zigzag(values: np.ndarray) -> np.ndarray:
    """Avro's zig-zag for longs: (n << 1) ^ (n >> 63), as uint64."""
    v = values.astype(I64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(U64)


def u64(value: int) -> np.uint64:
    return np.uint64(value)


# Continuation bits by varint length: 0x80 on every byte but the last.
_CONT_LO = np.array([0, 0] + [sum(0x80 << (8 * k) for k in range(n - 1)) for n in range(2, 9)]
                    + [0x8080808080808080] * 2, U64)
_CONT_HI = np.array([0] * 10 + [0x80], U64)


def _bit_length(words: np.ndarray) -> np.ndarray:
    """Bit length of uint64 words with no run of 53 one-bits (so float64 rounding keeps the exponent)."""
    exponent = words.astype(np.float64).view(I64) >> 52
    return np.maximum(exponent - 1022, 0)


def varint(z: np.ndarray) -> Word:
    """Unsigned varints (7 bits per byte, low group first) of a uint64 array, as words.

    The 7-bit groups are spread into bytes in three mask-and-shift stages (28/14/7 bits, as a software
    ``pdep``); a byte length is the spread word's bit length rounded up to bytes, and the continuation
    bits come from a table indexed by that length."""
    n = z.shape[0]
    top = int(z.max()) if n else 0
    if top < 1 << 7:
        return Word(z, None, 1, 1)
    x = z if top < 1 << 56 else z & u64((1 << 56) - 1)
    if top >= 1 << 28:
        x = (x & u64(0xFFFFFFF)) | ((x & u64(0xFFFFFFF << 28)) << u64(4))
    if top >= 1 << 14:
        x = (x & u64(0x00003FFF00003FFF)) | ((x & u64(0x0FFFC0000FFFC000)) << u64(2))
    x = (x & u64(0x007F007F007F007F)) | ((x & u64(0x3F803F803F803F80)) << u64(1))
    if top < 1 << 14:
        lens = (z >= u64(128)).astype(I64) + 1
    else:
        lens = np.maximum((_bit_length(x) + 7) >> 3, 1)
    hi = None
    if top >= 1 << 56:
        big = z >= u64(1 << 56)
        y = z >> u64(56)
        hi = (y & u64(0x7F)) | ((y & u64(0x80)) << u64(1))
        lens = np.where(big, 9 + (z >= u64(1 << 63)), lens)
        hi |= _CONT_HI[lens]
    x |= _CONT_LO[lens]
    width = max(1, (top.bit_length() + 6) // 7)
    return Word(x, hi, lens, width)


def len_varint(lens: np.ndarray) -> Word:
    return varint(lens.astype(U64) << u64(1))  # zig-zag of a non-negative length


def byte_len_signed(values: np.ndarray) -> np.ndarray:
    """Minimal two's-complement length of int64 values (0 -> 1, 128 -> 2, -128 -> 1, -129 -> 2)."""
    mag = (values ^ (values >> 63)).view(U64)
    high = (mag >> u64(32)).astype(np.float64).view(I64) >> 52
    low = (mag & u64(0xFFFFFFFF)).astype(np.float64).view(I64) >> 52
    bits = np.where(mag >> u64(32) != 0, high - 1022 + 32, np.maximum(low - 1022, 0))  # exact: <= 32-bit halves
    return (bits >> 3) + 1


def byte_len_unsigned(values: np.ndarray) -> np.ndarray:
    """Minimal big-endian length of uint64 values, at least one byte (BIT)."""
    high = (values >> u64(32)).astype(np.float64).view(I64) >> 52
    low = (values & u64(0xFFFFFFFF)).astype(np.float64).view(I64) >> 52
    bits = np.where(values >> u64(32) != 0, high - 1022 + 32, np.maximum(low - 1022, 0))
    return np.maximum((bits + 7) >> 3, 1)


def be_word(values: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The low ``lens`` bytes of each value, big-endian, as a word whose memory holds them first."""
    shifted = values.view(U64) << ((8 - lens).astype(U64) << u64(3))
    return shifted.byteswap()


def sized_bytes(lens: np.ndarray, be: np.ndarray) -> Word:
    """A bytes datum of at most 8 bytes: zig-zag length byte, then the bytes."""
    lo = (lens.astype(U64) << u64(1)) | (be << u64(8))
    hi = be >> u64(56)
    return Word(lo, hi, lens + 1, 9)


def wide_twos(le: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimal big-endian two's complement of (n, W) little-endian values: (left-aligned matrix, lens)."""
    n, width = le.shape
    negative = le[:, width - 1] >= 0x80
    mag = le ^ (negative.view(U8) * U8(0xFF))[:, None]
    nonzero = mag != 0
    has = nonzero.any(axis=1)
    top = width - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    top_byte = mag[np.arange(n), top]
    lens = np.where(has, top + 1 + (top_byte >= 0x80), 1).astype(I64)
    ramp = np.arange(width, dtype=I64)
    index = np.clip(lens[:, None] - 1 - ramp, 0, width - 1)
    out = np.take_along_axis(le, index, axis=1)
    out *= ramp < lens[:, None]
    return out, lens


