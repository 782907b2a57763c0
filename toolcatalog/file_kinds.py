"""Telling text, images and other binary files apart from their first bytes."""

from __future__ import annotations

SNIFF_BYTES = 8192

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def sniff_image(head: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WebP image, else ``None``."""
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_utf16_text(head: bytes) -> bool:
    return head[:2] in UTF16_BOMS


def looks_binary(head: bytes) -> bool:
    """Git's rule: a NUL byte in the first 8 KB means binary (UTF-16 with a BOM excepted)."""
    if is_utf16_text(head):
        return False
    return b"\x00" in head[:SNIFF_BYTES]
