"""What an uploaded file is, decided by its bytes, and the name it may be saved under.

A browser's upload carries three claims: a name, a MIME type and bytes. The name and
the type are whatever the sender wrote (shinychat derives the type from the name's
extension, and anyone can send the websocket message by hand), so the kind of a file is
decided here from its content alone:

* images by their signature (PNG, JPEG, GIF, WebP), the check a tool's or an MCP
  server's image gets too (``_util/media.py``);
* a PDF by ``%PDF-``;
* DOCX and XLSX as ZIP archives holding ``word/document.xml`` or ``xl/workbook.xml``,
  checked by the sizes their central directory declares before any member is inflated
  (Python's ``zipfile``, which every reader here uses, never inflates a member past its
  declared size, so a bomb cannot hide behind a smaller claim);
* text (CSV, Markdown, plain text) as strict UTF-8 without NUL bytes, and not a markup
  document (HTML, SVG, XML): those would render as pages if anything ever showed them.

The name must agree with the content (``photo.png`` holding a PDF is refused: a file
tool or a person would trust the extension), then it is reduced to a safe base name.

Examples:
    >>> sniff(b"%PDF-1.7 ...", "report.pdf")
    'pdf'
    >>> sniff(b"a,b\\n1,2\\n", "data.csv")
    'csv'
    >>> safe_name("../../etc/pass\\x00wd.txt")
    'pass_wd.txt'
    >>> try:
    ...     sniff(b'<svg onload="alert(1)"></svg>', "chart.png")
    ... except AttachmentRefused as exc:
    ...     print(exc.rule)
    markup
"""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
from typing import Literal

from .._util.media import image_type
from ..errors import AttachmentRefused

__all__ = [
    "KIND_LABELS",
    "AttachmentKind",
    "AttachmentRefused",
    "human_size",
    "safe_name",
    "sniff",
    "unpacked_size",
]

AttachmentKind = Literal["image", "pdf", "docx", "xlsx", "csv", "markdown", "text"]

KIND_LABELS: dict[str, str] = {
    "image": "image",
    "pdf": "PDF",
    "docx": "Word document",
    "xlsx": "Excel workbook",
    "csv": "CSV",
    "markdown": "Markdown",
    "text": "text",
}

# The extensions a name of each kind may have (lower case, without the dot). A text file
# may also have none (README).
_EXTENSIONS: dict[str, frozenset[str]] = {
    "image": frozenset({"png", "jpg", "jpeg", "gif", "webp"}),
    "pdf": frozenset({"pdf"}),
    "docx": frozenset({"docx"}),
    "xlsx": frozenset({"xlsx"}),
    "csv": frozenset({"csv"}),
    "markdown": frozenset({"md", "markdown"}),
    "text": frozenset({"txt", "text", "log", ""}),
}

MAX_ZIP_MEMBERS = 5000
"""A DOCX or XLSX with more parts than this is refused (each costs a reader memory)."""

MAX_NAME_LENGTH = 100
"""Characters a saved name keeps (the extension included)."""

# Markup a text upload may not start with: an HTML, SVG or XML document.
_MARKUP = re.compile(rb"^\s*<(?:!doctype|\?xml|html|svg|head|body|script|iframe|!--)", re.I)
# What a saved name keeps: letters and digits of any script, and a few separators.
_UNSAFE = re.compile(r"[^\w .,()+\-]")


def human_size(size: int) -> str:
    """``size`` bytes in the units a person reads (1 KB = 1,000 bytes, as browsers show).

    Examples:
        >>> human_size(532), human_size(12_400), human_size(10_485_760)
        ('532 B', '12.4 KB', '10.5 MB')
    """
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB"):
        value /= 1000
        if value < 999.95:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} GB"


def _extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    head, dot, ext = base.rpartition(".")
    return ext.lower() if dot and head.strip(". ") else ""


def image_media_type(data: bytes) -> str:
    """The MIME type of an image :func:`sniff` accepted (``image/png``...): the kit's one
    image check (``_util.media.image_type``), as tools' images use."""
    kind = image_type(data)
    if kind is None:
        raise ValueError("not an image")
    return kind


def unpacked_size(data: bytes, name: str) -> tuple[int, list[str]]:
    """The bytes a ZIP archive declares it unpacks to, and its member names; read from
    the central directory only (nothing is inflated).

    Raises:
        AttachmentRefused: not a readable ZIP archive (rule ``invalid``), or more than
            :data:`MAX_ZIP_MEMBERS` members (rule ``bomb``).
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError):
        raise AttachmentRefused(
            f"{name} is a damaged ZIP archive.", name=name, rule="invalid"
        ) from None
    if len(infos) > MAX_ZIP_MEMBERS:
        raise AttachmentRefused(
            f"{name} holds {len(infos)} parts (at most {MAX_ZIP_MEMBERS}).", name=name, rule="bomb"
        )
    return sum(max(info.file_size, 0) for info in infos), [info.filename for info in infos]


def _office_kind(data: bytes, name: str, max_unpacked: int) -> AttachmentKind:
    total, members = unpacked_size(data, name)
    if total > max_unpacked:
        raise AttachmentRefused(
            f"{name} would unpack to {human_size(total)} (at most {human_size(max_unpacked)}): "
            "it looks like a decompression bomb.",
            name=name,
            rule="bomb",
        )
    present = set(members)
    if "word/document.xml" in present:
        return "docx"
    if "xl/workbook.xml" in present:
        return "xlsx"
    raise AttachmentRefused(
        f"{name} is a ZIP archive, not a Word document or Excel workbook.", name=name, rule="type"
    )


def _text_kind(data: bytes, name: str) -> AttachmentKind:
    body = data.removeprefix(b"\xef\xbb\xbf")
    if _MARKUP.match(body[:1024]):
        raise AttachmentRefused(
            f"{name} is an HTML, SVG or XML document, which the chat does not accept.",
            name=name,
            rule="markup",
        )
    if b"\x00" in body:
        raise AttachmentRefused(
            f"{name} is a binary file of a kind the chat does not accept.", name=name, rule="type"
        )
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise AttachmentRefused(
            f"{name} is neither UTF-8 text nor a file of a kind the chat accepts.",
            name=name,
            rule="type",
        ) from None
    ext = _extension(name)
    if ext in _EXTENSIONS["csv"]:
        return "csv"
    if ext in _EXTENSIONS["markdown"]:
        return "markdown"
    return "text"


def sniff(data: bytes, name: str, *, max_unpacked: int = 50_000_000) -> AttachmentKind:
    """The kind of an uploaded file, from its bytes; its name must agree.

    Raises:
        AttachmentRefused: a kind the chat never accepts, markup, a damaged or bombed
            archive, or a name that says another kind than the content.
    """
    if image_type(data) is not None:
        kind: AttachmentKind = "image"
    elif data.startswith(b"%PDF-"):
        kind = "pdf"
    elif data.startswith(b"PK\x03\x04"):
        kind = _office_kind(data, name, max_unpacked)
    else:
        kind = _text_kind(data, name)
    ext = _extension(name)
    if ext not in _EXTENSIONS[kind]:
        said = f".{ext}" if ext else "no extension"
        raise AttachmentRefused(
            f"{name} holds a {KIND_LABELS[kind]} but its name says {said}.",
            name=name,
            rule="mismatch",
        )
    return kind


def safe_name(name: str, fallback: str = "upload") -> str:
    """A base name to save an upload under: no directory, no control or format
    character (a right-to-left override could disguise the extension), no leading dot
    (a hidden file), only letters, digits and ``.,()+-_`` and spaces, at most
    :data:`MAX_NAME_LENGTH` characters with the extension kept.

    Examples:
        >>> safe_name("C:\\\\Users\\\\me\\\\.bashrc")
        'bashrc'
        >>> safe_name("\\u202etxt.exe.png")
        'txt.exe.png'
        >>> safe_name("...")
        'upload'
    """
    base = re.split(r"[/\\]", name)[-1]
    base = unicodedata.normalize("NFC", base)
    base = "".join(
        "_" if unicodedata.category(ch) == "Cc" else ch
        for ch in base
        if unicodedata.category(ch) != "Cf"
    )
    base = _UNSAFE.sub("_", base).strip(" ._")
    if not base:
        return fallback
    if len(base) > MAX_NAME_LENGTH:
        stem, dot, ext = base.rpartition(".")
        ext = ext[:12]
        keep = MAX_NAME_LENGTH - len(ext) - 1
        base = f"{stem[:keep]}.{ext}" if dot and stem else base[:MAX_NAME_LENGTH]
    return base
