"""A small PNG reader (zlib and the five scanline filters, 8-bit RGB or RGBA, not interlaced: what Chromium's
``--screenshot`` writes), so that a test can look at a screenshot's pixels without Pillow."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

__all__ = ["SIGNATURE", "Png", "read_png"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {2: 3, 6: 4}  # colour type: RGB, RGBA


@dataclass(frozen=True)
class Png:
    """A decoded image: ``rows`` of ``width * channels`` bytes each, top to bottom."""

    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        """The (red, green, blue) of a pixel."""
        at = x * self.channels
        r, g, b = self.rows[y][at:at + 3]
        return r, g, b

    def colours(self) -> set[bytes]:
        """The distinct RGB colours of the image."""
        c = self.channels
        return {row[i:i + 3] for row in self.rows for i in range(0, len(row), c)}

    def coloured_columns(self, top: int = 0, chroma: int = 40) -> int:
        """How many columns have, at or below row ``top``, a pixel of a colour (its highest channel at least
        ``chroma`` above its lowest): the series lines of a graph, not its grey text, grid and frame."""
        found = set()
        c = self.channels
        for row in self.rows[top:]:
            for x in range(self.width):
                if x in found:
                    continue
                r, g, b = row[x * c:x * c + 3]
                if max(r, g, b) - min(r, g, b) >= chroma:
                    found.add(x)
        return len(found)


def read_png(data: bytes) -> Png:
    """Decode ``data``; raises ``ValueError`` naming what is wrong when it is no PNG this reader knows."""
    if data[:8] != SIGNATURE:
        raise ValueError(f"not a PNG: it starts with {data[:8]!r}, not {SIGNATURE!r}")
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            raise ValueError(f"PNG chunk {kind!r} at byte {pos} fails its CRC")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without an IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"PNG of bit depth {depth}, colour type {colour}, interlace {interlace}: this reader takes "
                         "8-bit RGB (2) or RGBA (6), not interlaced")
    bpp = _CHANNELS[colour]
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != height * (stride + 1):
        raise ValueError(f"PNG data of {len(raw)} bytes for {width}x{height} pixels ({height * (stride + 1)} expected)")
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:  # Up
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif kind != 0:
            raise ValueError(f"PNG row {y} has filter type {kind} (0-4 exist)")
        rows.append(bytes(line))
        prev = line
    return Png(width=width, height=height, channels=bpp, rows=tuple(rows))
