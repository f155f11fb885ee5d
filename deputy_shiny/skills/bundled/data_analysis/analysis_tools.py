"""The ``data_analysis`` skill's tools: a dataset's summary and one column's statistics.

deputy's skill reads R data frames by variable name; here a dataset is a CSV file in
the working directory, read through :func:`deputy_shiny.tools.data.csv_rows`, so the
agent's read permissions apply as they do to ``read_csv``.
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import date

from deputy_shiny.errors import ToolInvocationError
from deputy_shiny.tools.data import csv_rows

_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "#n/a"})
_TOP_VALUES = 10


def _present(values: list[str]) -> list[str]:
    return [v.strip() for v in values if v.strip().lower() not in _MISSING]


def _numbers(values: list[str]) -> list[float] | None:
    """The values as numbers, or None when one of them is not a number."""
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _dates(values: list[str]) -> list[date] | None:
    try:
        return [date.fromisoformat(v[:10]) for v in values]
    except ValueError:
        return None


def _fmt(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e6 else f"{x:.6g}"


def eda_summary(path: str) -> str:
    """Provide an exploratory data analysis summary of a dataset: its size, and for each
    column its type, range and mean (numbers) or distinct values (text), and missing values.

    Args:
        path: The dataset, a CSV file relative to the working directory.
    """
    header, rows = csv_rows(path)
    lines = ["Dataset Summary", "=" * 50, f"Rows: {len(rows)}", f"Columns: {len(header)}", ""]
    lines += ["Column Types:", "-" * 30]
    for index, name in enumerate(header):
        column = [row[index] for row in rows]
        values = _present(column)
        missing = len(column) - len(values)
        numbers = _numbers(values) if values else None
        if numbers:
            lines.append(
                f"  {name} (number): min={_fmt(min(numbers))}, max={_fmt(max(numbers))}, "
                f"mean={_fmt(statistics.fmean(numbers))}, missing={missing}"
            )
        else:
            lines.append(f"  {name} (text): {len(set(values))} unique values, missing={missing}")
    return "\n".join(lines)


def describe_column(path: str, column: str) -> str:
    """Get detailed statistics for one column of a dataset: counts and missing values;
    for numbers the range, mean, median, standard deviation and quartiles; for dates the
    range; for text the most frequent values.

    Args:
        path: The dataset, a CSV file relative to the working directory.
        column: The name of the column to describe.
    """
    header, rows = csv_rows(path)
    if column not in header:
        raise ToolInvocationError(
            f"Column not found: {column!r}. The columns: {', '.join(header)}."
        )
    raw = [row[header.index(column)] for row in rows]
    values = _present(raw)
    total, valid = len(raw), len(values)
    share = 100 * (total - valid) / total if total else 0.0
    lines = [
        f"Column: {column}",
        f"Total values: {total}",
        f"Missing: {total - valid} ({share:.1f}%)",
        f"Valid values: {valid}",
        "",
    ]
    numbers = _numbers(values) if values else None
    dates = None if numbers is not None or not values else _dates(values)
    if numbers:
        lines.append("Type: number")
        lines += _number_lines(numbers)
    elif dates:
        span = (max(dates) - min(dates)).days
        lines += ["Type: date", f"Earliest: {min(dates)}", f"Latest: {max(dates)}"]
        lines.append(f"Span: {span} days")
    else:
        counts = Counter(values)
        lines += ["Type: text", f"Unique values: {len(counts)}", "", "Top values (frequency):"]
        for value, count in counts.most_common(_TOP_VALUES):
            lines.append(f"  {value}: {count} ({100 * count / valid:.1f}%)")
        if len(counts) > _TOP_VALUES:
            lines.append(f"  ... and {len(counts) - _TOP_VALUES} more")
    return "\n".join(lines)


def _number_lines(numbers: list[float]) -> list[str]:
    lines = [
        f"Min: {_fmt(min(numbers))}",
        f"Max: {_fmt(max(numbers))}",
        f"Mean: {_fmt(statistics.fmean(numbers))}",
        f"Median: {_fmt(statistics.median(numbers))}",
    ]
    if len(numbers) > 1:
        q1, q2, q3 = statistics.quantiles(numbers, n=4, method="inclusive")
        lines.append(f"Std dev: {_fmt(statistics.stdev(numbers))}")
        lines += ["Quartiles:", f"  25%: {_fmt(q1)}", f"  50%: {_fmt(q2)}", f"  75%: {_fmt(q3)}"]
    return lines
