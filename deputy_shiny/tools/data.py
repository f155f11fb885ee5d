"""Data tools: ``read_csv`` summarises a CSV file (shape, column types, missing values, preview).

Reading uses only the standard library ``csv`` module. The dialect (delimiter among
``, ; TAB |``, quoting) is sniffed from the start of the file; a UTF-8 byte-order mark
is dropped, UTF-16 files with a BOM are decoded, and files that are not UTF-8 are read
as Latin-1 (and the summary says so). The first row is taken as the header.

Each column gets one type, inferred from its non-missing values: ``integer``,
``number``, ``boolean`` (true/false/yes/no), ``date`` (ISO ``YYYY-MM-DD``),
``datetime`` (ISO date and time), ``text``, or ``empty`` when every value is missing.
Missing means empty, or one of ``NA``, ``N/A``, ``NaN``, ``null``, ``None``, ``#N/A``
(any case).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deputy_shiny.tools import ToolContext, tool_context
    >>> root = Path(tempfile.mkdtemp()).resolve()
    >>> _ = (root / "scores.csv").write_text("name,score\\nAda,9\\nBo,7\\n")
    >>> with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=())):
    ...     print(read_csv("scores.csv").splitlines()[0])
    scores.csv: 2 rows × 2 columns (delimiter ",", UTF-8)
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from .._paths import PathDenied, confine, real_roots
from .._util import safe_fs
from .._util.text import plural
from ..errors import ToolInvocationError
from ._context import current_tool_context
from ._tool import Tool, builtin_source, tool, tool_annotations

__all__ = ["MAX_CSV_BYTES", "MAX_PREVIEW_ROWS", "csv_rows", "read_csv", "tool_read_csv"]

MAX_CSV_BYTES = 20 * 1024 * 1024
"""The largest file ``read_csv`` reads (20 MiB)."""

MAX_PREVIEW_ROWS = 100
"""The most rows ``read_csv`` shows, whatever ``max_rows`` asks for."""

_SNIFF_CHARS = 64 * 1024
_DELIMITERS = ",;\t|"
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "#n/a"})
_BOOLEANS = frozenset({"true", "false", "yes", "no"})
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_CELL_CHARS = 60
_MAX_DISTINCT = 10_000
_MAX_RAGGED_SHOWN = 5
_SIGNATURES = (
    (b"PK\x03\x04", "a ZIP archive or an Excel workbook (.xlsx); export it as CSV first"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office document (.xls); export it as CSV first"),
    (b"PAR1", "a Parquet file, not a CSV"),
    (b"\x89PNG", "a PNG image, not a CSV"),
    (b"%PDF", "a PDF document, not a CSV"),
    (b"\x1f\x8b", "a gzip-compressed file; decompress it first"),
    (b"SQLite format 3", "an SQLite database, not a CSV"),
)


@dataclass
class _Column:
    """What one column's values add up to."""

    name: str
    kinds: set[str] = field(default_factory=set)
    missing: int = 0
    low: float | str | None = None
    high: float | str | None = None
    distinct: set[str] = field(default_factory=set)
    trues: int = 0
    count: int = 0

    def add(self, raw: str, decimal_comma: bool) -> None:
        value = raw.strip()
        if value.lower() in _MISSING:
            self.missing += 1
            return
        self.count += 1
        if len(self.distinct) <= _MAX_DISTINCT:
            self.distinct.add(value)
        if "text" in self.kinds:
            return
        kind, key = _classify(value, decimal_comma)
        self.kinds.add(kind)
        if kind == "boolean" and value.lower() in ("true", "yes"):
            self.trues += 1
        if key is not None and (self.low is None or _less(key, self.low)):
            self.low = key
        if key is not None and (self.high is None or _less(self.high, key)):
            self.high = key

    @property
    def type(self) -> str:
        kinds = self.kinds
        if not kinds:
            return "empty"
        if len(kinds) == 1:
            return next(iter(kinds))
        if kinds <= {"integer", "number"}:
            return "number"
        if kinds <= {"date", "datetime"}:
            return "datetime"
        return "text"

    def summary(self) -> str:
        kind = self.type
        if kind in ("integer", "number", "date", "datetime") and self.low is not None:
            return f"{_show(self.low)} to {_show(self.high)}"
        if kind == "boolean":
            return f"{self.trues:,} true, {self.count - self.trues:,} false"
        if kind == "text":
            count = len(self.distinct)
            more = "more than " if count > _MAX_DISTINCT else ""
            return f"{more}{min(count, _MAX_DISTINCT):,} distinct"
        return ""


def _less(a: float | str, b: float | str) -> bool:
    return (a < b) if type(a) is type(b) else str(a) < str(b)  # type: ignore[operator]


def _show(value: float | str | None) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _classify(value: str, decimal_comma: bool) -> tuple[str, float | str | None]:
    """The most specific kind of one non-missing value, and its sort key."""
    lower = value.lower()
    if lower in _BOOLEANS:
        return "boolean", None
    if _INTEGER.fullmatch(value):
        return "integer", float(value)
    if _NUMBER.fullmatch(value):
        return "number", float(value)
    if decimal_comma and _DECIMAL_COMMA.fullmatch(value):
        return "number", float(value.replace(",", "."))
    if _DATE.fullmatch(value):
        try:
            return "date", date.fromisoformat(value).isoformat()
        except ValueError:
            return "text", None
    if _DATETIME.fullmatch(value):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return "text", None
        return "datetime", value
    return "text", None


def _decode(data: bytes) -> tuple[str, str]:
    """The text of the file and the name of its encoding."""
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8) :].decode("utf-8", errors="replace"), "UTF-8 with BOM"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace"), "UTF-16"
    for signature, what in _SIGNATURES:
        if data.startswith(signature):
            raise ToolInvocationError(f"This is not a CSV file: it looks like {what}.")
    if b"\x00" in data[:8192]:
        raise ToolInvocationError(
            "This is not a CSV file: it contains binary data (NUL bytes). read_csv reads "
            "delimited text files."
        )
    try:
        return data.decode("utf-8"), "UTF-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "Latin-1 (not valid UTF-8)"


def _sniff(text: str) -> type[csv.Dialect] | csv.Dialect:
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        return csv.excel  # one column, or nothing the sniffer recognised


def _looks_like_json(text: str) -> bool:
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _cell(value: str, limit: int = _CELL_CHARS) -> str:
    """A value made safe for one markdown table cell."""
    text = " ".join(value.split()) if any(c in value for c in "\r\n\t") else value
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _column_name(name: str, index: int) -> str:
    return name.strip() or f"(unnamed column {index + 1})"


def read_csv(path: str, max_rows: int = 10) -> str:
    """Summarise a CSV file: its shape, each column's type and missing values, and the first rows.

    Args:
        path: The CSV file, relative to the working directory.
        max_rows: How many of the first rows to show (0 for none; at most 100).
    """
    if max_rows < 0:
        raise ToolInvocationError(f"max_rows must be 0 or more, got {max_rows}.")
    shown_rows = min(max_rows, MAX_PREVIEW_ROWS)
    text, encoding = _read_text(path)
    return _summarise(Path(path).name, text, encoding, shown_rows, max_rows)


def _read_text(path: str) -> tuple[str, str]:
    """The text of the CSV file ``path`` (confined to the readable roots) and its encoding."""
    ctx = current_tool_context()
    try:
        resolved = confine(path, ctx.working_dir, ctx.read_roots, what="read")
        where = safe_fs.beneath(resolved, real_roots(ctx.read_roots))
        if where is None:  # pragma: no cover - confine returned a path inside a root
            raise ToolInvocationError(f"{path!r} is outside the directories this agent may read.")
        # Opened beneath the root by descriptor, no symlink followed at any component:
        # what is read is what confine checked, even if a directory is swapped meanwhile.
        fd, info = safe_fs.open_regular(*where)
    except PathDenied as exc:
        raise ToolInvocationError(str(exc)) from None
    except FileNotFoundError:
        raise ToolInvocationError(f"File not found: {path!r}.") from None
    except OSError as exc:
        if isinstance(exc, IsADirectoryError) or exc.strerror == "Not a regular file":
            raise ToolInvocationError(f"{path!r} is not a file.") from None
        raise ToolInvocationError(f"Could not read {path!r}: {exc.strerror or exc}.") from None
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > MAX_CSV_BYTES:
            raise ToolInvocationError(
                f"{path!r} is {info.st_size / 1024 / 1024:.1f} MiB; read_csv reads files up to "
                f"{MAX_CSV_BYTES // 1024 // 1024} MiB. Summarise it with code instead "
                "(for example run_python), reading it in chunks."
            )
        try:
            data = fh.read(MAX_CSV_BYTES + 1)
        except OSError as exc:
            raise ToolInvocationError(f"Could not read {path!r}: {exc.strerror or exc}.") from None
    if len(data) > MAX_CSV_BYTES:
        raise ToolInvocationError(f"{path!r} grew past {MAX_CSV_BYTES // 1024 // 1024} MiB.")
    text, encoding = _decode(data)
    if not text.strip():
        raise ToolInvocationError(f"{path!r} is empty: there is no header row and no data.")
    if _looks_like_json(text):
        raise ToolInvocationError(
            f"{path!r} holds JSON, not CSV. Read it with read_file (or parse it with code)."
        )
    return text, encoding


def csv_rows(path: str) -> tuple[list[str], list[list[str]]]:
    """The header and the data rows of the CSV file ``path``, read as ``read_csv`` reads it.

    For tools that compute on a CSV (the bundled ``data_analysis`` skill's): the path is
    confined to the directories the agent may read, and the same limits, decoding and
    dialect sniffing apply. Blank lines are skipped; a row of another length is an error.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from deputy_shiny.tools import ToolContext, tool_context
        >>> root = Path(tempfile.mkdtemp()).resolve()
        >>> _ = (root / "scores.csv").write_text("name;score\\nAda;9\\n")
        >>> with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=())):
        ...     csv_rows("scores.csv")
        (['name', 'score'], [['Ada', '9']])
    """
    text, _ = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), _sniff(text), strict=True)
    name = Path(path).name
    try:
        records = [r for r in reader if r and not (len(r) == 1 and not r[0].strip())]
    except csv.Error as exc:
        raise ToolInvocationError(
            f"{name} is not valid CSV near line {reader.line_num}: {exc}."
        ) from None
    if not records:
        raise ToolInvocationError(f"{name} is empty: there is no header row and no data.")
    header, rows = records[0], records[1:]
    for number, row in enumerate(rows, start=1):
        if len(row) != len(header):
            raise ToolInvocationError(
                f"{name}: data row {number} has {len(row)} fields, the header {len(header)}."
            )
    return header, rows


def _summarise(name: str, text: str, encoding: str, shown_rows: int, asked_rows: int) -> str:
    dialect = _sniff(text)
    delimiter = dialect.delimiter
    reader = csv.reader(io.StringIO(text, newline=""), dialect, strict=True)
    header: list[str] | None = None
    columns: list[_Column] = []
    preview: list[list[str]] = []
    ragged: list[str] = []
    ragged_count = 0
    rows = 0
    decimal_comma = delimiter != ","
    try:
        for record in reader:
            if not record or (len(record) == 1 and not record[0].strip()):
                continue  # blank line
            if header is None:
                header = record
                columns = [_Column(_column_name(h, i)) for i, h in enumerate(header)]
                continue
            rows += 1
            if len(record) != len(header):
                ragged_count += 1
                if len(ragged) < _MAX_RAGGED_SHOWN:
                    ragged.append(
                        f"data row {rows} (line {reader.line_num}) has {len(record)} fields"
                    )
                continue
            for column, value in zip(columns, record, strict=True):
                column.add(value, decimal_comma)
            if len(preview) < shown_rows:
                preview.append(record)
    except csv.Error as exc:
        raise ToolInvocationError(
            f"{name} is not valid CSV near line {reader.line_num}: {exc}. Check its quoting "
            "(read_file shows the raw lines)."
        ) from None
    if header is None:
        raise ToolInvocationError(f"{name} is empty: there is no header row and no data.")
    if ragged_count:
        more = f" (and {ragged_count - len(ragged)} more)" if ragged_count > len(ragged) else ""
        raise ToolInvocationError(
            f"{name} has rows of different lengths: the header has {len(header)} columns "
            f"(delimiter {_delimiter_name(delimiter)}), but {'; '.join(ragged)}{more}. "
            "The file may use another delimiter, have unquoted delimiters inside values, "
            "or be damaged; read_file shows the raw lines."
        )
    shape = (
        f"{plural(rows, 'row', thousands=True)} × {plural(len(header), 'column', thousands=True)}"
    )
    lines = [
        f"{name}: {shape} (delimiter {_delimiter_name(delimiter)}, {encoding})",
        "",
        "Columns:",
        _table(
            ["column", "type", "missing", "values"],
            [[c.name, c.type, f"{c.missing:,}", c.summary()] for c in columns],
        ),
    ]
    if shown_rows and rows:
        capped = " (max_rows is capped at 100)" if asked_rows > MAX_PREVIEW_ROWS else ""
        lines += [
            "",
            f"First {len(preview)} of {rows:,} rows{capped}:",
            _table([c.name for c in columns], preview),
        ]
    return _clip_lines("\n".join(lines))


def _delimiter_name(delimiter: str) -> str:
    return {"\t": "tab", ",": '","', ";": '";"', "|": '"|"'}.get(delimiter, repr(delimiter))


def _clip_lines(text: str, limit: int = 30_000) -> str:
    if len(text) <= limit:
        return text
    kept = text[:limit]
    kept = kept[: kept.rfind("\n")] if "\n" in kept else kept
    return f"{kept}\n[... {len(text) - len(kept):,} characters cut ...]"


def tool_read_csv() -> Tool:
    """A ``read_csv`` tool: a CSV file's shape, column types, missing values and first rows.

    Examples:
        >>> t = tool_read_csv()
        >>> t.name, t.annotations.read_only_hint
        ('read_csv', True)
    """
    return tool(
        read_csv,
        name="read_csv",
        description=(
            "Read and summarise a CSV file in the working directory: the number of rows and "
            "columns, each column's name, inferred type (integer, number, boolean, date, "
            "datetime, text) and count of missing values, and the first rows as a table. "
            "The delimiter is detected; the first row is the header."
        ),
        annotations=tool_annotations(
            read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
        ),
        source=builtin_source("read"),
    )
