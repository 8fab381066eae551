"""Minimal PNG writer (zlib only), so tools can save camera frames without
Pillow."""

import struct
import zlib

import numpy as np


def _chunk(tag: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", zlib.crc32(tag + payload) & 0xFFFFFFFF)


def write_png(path: str, image: np.ndarray) -> None:
    """Writes an HxWx3 uint8 RGB or HxW uint8 grey image."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    height, width = image.shape[:2]
    color_type = 2 if image.ndim == 3 else 0
    # Each row starts with filter type 0 (none).
    rows = np.hstack([np.zeros((height, 1), np.uint8), image.reshape(height, -1)])
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n")
        out.write(_chunk(b"IHDR", header))
        out.write(_chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)))
        out.write(_chunk(b"IEND", b""))


def depth_to_grey(depth_m: np.ndarray, max_m: float = 4.0) -> np.ndarray:
    """Near = bright, far or +inf = black."""
    finite = np.where(np.isfinite(depth_m), depth_m, max_m)
    return (255 * (1.0 - np.clip(finite / max_m, 0, 1))).astype(np.uint8)
