"""What a blob of image or audio bytes is, read from the bytes alone: the one check.

Every place that lets bytes become an image or a sound (a tool's returned image, an MCP
server's image and audio blocks, a chat upload, the image a tool card shows) asks here,
never the type a sender declared: a name, a MIME type or a ``data:`` URL prefix are
claims anyone can write, so an SVG (markup, with scripts) declared ``image/png`` is
still no image. Only raster formats every browser and vision model reads count as
images (PNG, JPEG, GIF, WebP); only the formats models take as input audio count as
audio (WAV, MP3).

Examples:
    >>> image_type(b"\\x89PNG\\r\\n\\x1a\\n..."), image_type(b"<svg onload=alert(1)>")
    ('image/png', None)
    >>> audio_type(b"RIFF\\x00\\x00\\x00\\x00WAVEfmt ")
    'audio/wav'
    >>> decoded_size("aGVsbG8=")
    5
"""

from __future__ import annotations

__all__ = ["AUDIO_FORMATS", "audio_type", "decoded_size", "image_type"]

AUDIO_FORMATS: dict[str, str] = {"audio/wav": "wav", "audio/mpeg": "mp3"}
"""The audio media types that reach a model, and the ``input_audio`` format of each."""

# MPEG audio frame sync: 11 set bits, then a version other than "reserved" (01) and a
# layer other than "reserved" (00); layer III is what .mp3 files hold.
_MP3_FRAME = frozenset({0xFB, 0xFA, 0xF3, 0xF2, 0xE3, 0xE2})


def image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image, read from its first bytes; None
    for anything else (SVG included: it is markup, not an image to show).

    Examples:
        >>> image_type(b"GIF89a..."), image_type(b"RIFF\\x00\\x00\\x00\\x00WEBPVP8 ")
        ('image/gif', 'image/webp')
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def audio_type(data: bytes) -> str | None:
    """The media type of WAV or MP3 audio, read from its first bytes; None for anything
    else (other audio formats included: models take these two).

    Examples:
        >>> audio_type(b"ID3\\x04\\x00..."), audio_type(b"OggS...")
        ('audio/mpeg', None)
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] in _MP3_FRAME):
        return "audio/mpeg"
    return None


def decoded_size(data: str) -> int:
    """How many bytes base64 text decodes to, computed from its length (nothing is
    decoded, so an oversized blob is refused before it is copied).

    Examples:
        >>> decoded_size(""), decoded_size("aGk="), decoded_size("aGVsbG8gd29ybGQ=")
        (0, 2, 11)
    """
    stripped = len(data) - data[-2:].count("=")
    return stripped * 3 // 4
