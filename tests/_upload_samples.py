"""Small files of each kind an upload test sends, and hostile ones, built in memory."""

from __future__ import annotations

import base64
import io
import struct
import zipfile
import zlib
from types import SimpleNamespace


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid PNG of grey pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
CSV = b"city,people\nLyon,522000\nNantes,320000\n"
MARKDOWN = b"# Notes\n\nThe *quarterly* plan.\n"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'


def office(part: str, size: int = 200) -> bytes:
    """A ZIP holding ``part`` (``word/document.xml``: a DOCX; ``xl/workbook.xml``: an XLSX)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(part, "<x>" + "a" * size + "</x>")
    return buffer.getvalue()


def docx(size: int = 200) -> bytes:
    return office("word/document.xml", size)


def xlsx() -> bytes:
    return office("xl/workbook.xml")


def attachment_value(name: str, data: bytes, mime: str = "text/plain") -> dict[str, object]:
    """One attached file as shinychat's input value carries it (a base64 data URL)."""
    url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return {"name": name, "mime": mime, "size": len(data), "data_url": url}


def attachment(name: str, data: bytes, mime: str = "text/plain") -> SimpleNamespace:
    """What shinychat hands the server for one attached file (its ``Attachment``)."""
    return SimpleNamespace(**attachment_value(name, data, mime))
