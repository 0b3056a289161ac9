"""tests/support/png.py, the reader the Prometheus test looks at Chromium's screenshot with: each of PNG's five
scanline filters decodes back to the pixels, and what is no PNG it knows is refused."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from tests.support.png import SIGNATURE, read_png


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _encode(rows: list[bytes], width: int, channels: int) -> bytes:
    """A PNG of ``rows``, row y filtered with filter type y % 5 (the encoder's side of each filter)."""
    out, prev = bytearray(), bytes(width * channels)
    for y, row in enumerate(rows):
        kind = y % 5
        left = [row[i - channels] if i >= channels else 0 for i in range(len(row))]
        corner = [prev[i - channels] if i >= channels else 0 for i in range(len(row))]
        predict = [[0] * len(row), left, list(prev), [(a + b) >> 1 for a, b in zip(left, prev, strict=True)],
                   [_paeth(a, b, c) for a, b, c in zip(left, prev, corner, strict=True)]][kind]
        out += bytes([kind]) + bytes((x - p) & 255 for x, p in zip(row, predict, strict=True))
        prev = row
    colour = {3: 2, 4: 6}[channels]
    return (SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, len(rows), 8, colour, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(bytes(out))) + _chunk(b"IEND", b""))


@pytest.mark.parametrize("channels", [3, 4])
def test_each_filter_decodes_to_the_pixels(channels):
    rng = random.Random(7)
    width = 9
    rows = [bytes(rng.randrange(256) for _ in range(width * channels)) for _ in range(10)]  # each filter twice

    png = read_png(_encode(rows, width, channels))

    assert (png.width, png.height, png.channels) == (width, 10, channels)
    assert list(png.rows) == rows
    assert png.pixel(2, 3) == tuple(rows[3][2 * channels:2 * channels + 3])
    assert len(png.colours()) == len({r[i:i + 3] for r in rows for i in range(0, len(r), channels)})


def test_coloured_columns_counts_columns_with_a_saturated_pixel():
    grey, green = bytes([120, 120, 120]), bytes([115, 192, 58])
    rows = [grey * 6, grey * 2 + green * 2 + grey * 2, grey * 5 + green]

    png = read_png(_encode(rows, 6, 3))

    assert png.coloured_columns() == 3
    assert png.coloured_columns(top=2) == 1  # only the rows at or below top count
    assert read_png(_encode([grey * 6] * 3, 6, 3)).coloured_columns() == 0


def test_what_is_no_png_it_knows_is_refused():
    good = _encode([bytes(6)], 2, 3)
    with pytest.raises(ValueError, match="not a PNG"):
        read_png(b"<html>" + good)
    broken = bytearray(good)
    broken[len(SIGNATURE) + 10] ^= 1  # a byte of IHDR's body
    with pytest.raises(ValueError, match=r"IHDR.* fails its CRC"):
        read_png(bytes(broken))
    grey16 = SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 16, 0, 0, 0, 0)) + _chunk(b"IEND", b"")
    with pytest.raises(ValueError, match="bit depth 16, colour type 0"):
        read_png(grey16)
