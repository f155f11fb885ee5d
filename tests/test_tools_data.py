"""read_csv: shape, inferred column types, missing values, dialects, encodings, bad files."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ToolInvocationError
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolContext, tool_context, tool_metadata
from deputy_shiny.tools import data as data_module
from deputy_shiny.tools.data import tool_read_csv


async def read(root: Path, path: str, **arguments: Any) -> str:
    """Call read_csv the way the engine does, with ``root`` as the working directory."""
    t = tool_read_csv()
    with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=())):
        result = await t.invoke(t.parse_arguments({"path": path, **arguments}))
    assert isinstance(result, str)
    return result


async def fails(root: Path, path: str, **arguments: Any) -> str:
    with pytest.raises(ToolInvocationError) as info:
        await read(root, path, **arguments)
    return str(info.value)


def column_rows(summary: str) -> dict[str, list[str]]:
    """The rows of the "Columns:" table, by column name: [type, missing, values]."""
    table = summary.split("Columns:\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table]
    return {row[0]: row[1:] for row in cells}


def test_factory_returns_a_fresh_read_only_tool() -> None:
    t = tool_read_csv()
    assert t is not tool_read_csv()
    meta = tool_metadata(t)
    assert meta["name"] == "read_csv"
    assert meta["source"] == {"type": "package", "package": "deputy_shiny"}
    assert meta["annotations"] == {
        "read_only_hint": True,
        "destructive_hint": False,
        "open_world_hint": False,
        "idempotent_hint": True,
    }
    assert t.parameters["required"] == ["path"]
    assert t.parameters["properties"]["max_rows"]["default"] == 10


async def test_types_missing_values_and_ranges(tmp_path: Path) -> None:
    (tmp_path / "people.csv").write_text(
        "id,name,score,member,joined,seen,notes,blank\n"
        "1,Ada,9.5,true,2024-01-31,2024-01-31T10:00:00,,\n"
        "2,Bo,7,FALSE,2023-12-01,2024-02-01 08:30,NA,\n"
        "3,Cy,,yes,2024-03-05,2024-03-05T00:00Z,x,NA\n"
        "4,,-1e3,no,,2024-04-01,hello,\n"
    )
    out = await read(tmp_path, "people.csv")
    assert out.startswith('people.csv: 4 rows × 8 columns (delimiter ",", UTF-8)')
    columns = column_rows(out)
    assert list(columns) == ["id", "name", "score", "member", "joined", "seen", "notes", "blank"]
    assert columns["id"] == ["integer", "0", "1 to 4"]
    assert columns["name"] == ["text", "1", "3 distinct"]
    assert columns["score"] == ["number", "1", "-1000 to 9.5"]
    assert columns["member"] == ["boolean", "0", "2 true, 2 false"]
    assert columns["joined"] == ["date", "1", "2023-12-01 to 2024-03-05"]
    assert columns["seen"][:2] == ["datetime", "0"]
    assert columns["notes"] == ["text", "2", "2 distinct"]
    assert columns["blank"] == ["empty", "4", ""]


async def test_invalid_dates_and_mixed_values_are_text(tmp_path: Path) -> None:
    (tmp_path / "mixed.csv").write_text("d,m,z\n2024-02-30,1,007\n2024-01-01,a,12\n")
    columns = column_rows(await read(tmp_path, "mixed.csv"))
    assert columns["d"][0] == "text"  # February 30th is no date
    assert columns["m"][0] == "text"
    assert columns["z"] == ["integer", "0", "7 to 12"]


async def test_preview_shows_the_first_rows_as_a_markdown_table(tmp_path: Path) -> None:
    rows = "".join(f"{i},item {i}\n" for i in range(1, 21))
    (tmp_path / "items.csv").write_text("n,label\n" + rows)
    out = await read(tmp_path, "items.csv", max_rows=3)
    assert out.endswith(
        "First 3 of 20 rows:\n| n | label |\n|---|---|\n"
        "| 1 | item 1 |\n| 2 | item 2 |\n| 3 | item 3 |"
    )
    assert "First" not in await read(tmp_path, "items.csv", max_rows=0)
    assert "First 10 of 20 rows:" in await read(tmp_path, "items.csv")
    capped = await read(tmp_path, "items.csv", max_rows=500)
    assert "First 20 of 20 rows (max_rows is capped at 100):" in capped
    assert "max_rows must be 0 or more" in await fails(tmp_path, "items.csv", max_rows=-1)


async def test_bom_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "bom.csv").write_bytes(codecs.BOM_UTF8 + "id,name\n1,Zoë\n".encode())
    out = await read(tmp_path, "bom.csv")
    assert out.startswith('bom.csv: 1 row × 2 columns (delimiter ",", UTF-8 with BOM)')
    assert list(column_rows(out)) == ["id", "name"]
    assert "| 1 | Zoë |" in out


async def test_semicolon_dialect_with_decimal_commas_and_quotes(tmp_path: Path) -> None:
    (tmp_path / "eu.csv").write_text(
        'product;price;note\n"Brot; dunkel";2,50;"sagt ""gut"""\nMilch;1,15;\nKäse;12;"a|b"\n'
    )
    out = await read(tmp_path, "eu.csv")
    assert out.startswith('eu.csv: 3 rows × 3 columns (delimiter ";", UTF-8)')
    columns = column_rows(out)
    assert columns["price"] == ["number", "0", "1.15 to 12"]
    assert columns["note"][:2] == ["text", "1"]
    assert '| Brot; dunkel | 2,50 | sagt "gut" |' in out
    assert "| Käse | 12 | a\\|b |" in out  # pipes are escaped in the table


async def test_tabs_and_quoted_newlines(tmp_path: Path) -> None:
    (tmp_path / "t.tsv").write_text('a\tb\n1\t"two\nlines"\n3\tfour\n')
    out = await read(tmp_path, "t.tsv")
    assert out.startswith("t.tsv: 2 rows × 2 columns (delimiter tab, UTF-8)")
    assert "| 1 | two lines |" in out


async def test_one_column_and_header_only_files(tmp_path: Path) -> None:
    (tmp_path / "one.csv").write_text("city\nOslo\nLima\n\n")
    out = await read(tmp_path, "one.csv")
    assert out.startswith("one.csv: 2 rows × 1 column")
    assert column_rows(out)["city"] == ["text", "0", "2 distinct"]
    (tmp_path / "head.csv").write_text("a,b,c\n")
    out = await read(tmp_path, "head.csv")
    assert out.startswith("head.csv: 0 rows × 3 columns")
    assert column_rows(out)["a"] == ["empty", "0", ""]


async def test_other_encodings(tmp_path: Path) -> None:
    (tmp_path / "latin.csv").write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    out = await read(tmp_path, "latin.csv")
    assert "Latin-1 (not valid UTF-8)" in out and "| José | Málaga |" in out
    (tmp_path / "u16.csv").write_bytes("name,n\nÅsa,1\n".encode("utf-16"))
    out = await read(tmp_path, "u16.csv")
    assert "UTF-16" in out and "| Åsa | 1 |" in out


async def test_unnamed_columns_get_a_label(tmp_path: Path) -> None:
    (tmp_path / "u.csv").write_text(",value\nr1,1\n")
    assert list(column_rows(await read(tmp_path, "u.csv"))) == ["(unnamed column 1)", "value"]


# ---------------------------------------------------------------- bad input


async def test_empty_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "blank.csv").write_text("\n  \n")
    assert "is empty" in await fails(tmp_path, "empty.csv")
    assert "is empty" in await fails(tmp_path, "blank.csv")


async def test_files_that_are_not_csv_are_named(tmp_path: Path) -> None:
    (tmp_path / "book.xlsx").write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    (tmp_path / "pic.csv").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    (tmp_path / "blob.csv").write_bytes(b"a,b\n\x00\x01\x02,3\n")
    (tmp_path / "data.json").write_text('[{"a": 1}, {"a": 2}]')
    assert "Excel workbook" in await fails(tmp_path, "book.xlsx")
    assert "PNG image" in await fails(tmp_path, "pic.csv")
    assert "binary data" in await fails(tmp_path, "blob.csv")
    assert "holds JSON, not CSV" in await fails(tmp_path, "data.json")


async def test_ragged_rows_are_reported_with_line_numbers(tmp_path: Path) -> None:
    (tmp_path / "ragged.csv").write_text("a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n")
    message = await fails(tmp_path, "ragged.csv")
    assert message.startswith("ragged.csv has rows of different lengths: the header has 3 columns")
    assert "data row 2 (line 3) has 2 fields; data row 3 (line 4) has 4 fields" in message


async def test_broken_quoting_is_reported(tmp_path: Path) -> None:
    (tmp_path / "quote.csv").write_text('a,b\n1,"open\n2,3\n')
    assert "is not valid CSV near line" in await fails(tmp_path, "quote.csv")


async def test_large_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_module, "MAX_CSV_BYTES", 1024 * 1024)
    (tmp_path / "big.csv").write_text("a,b\n" + "1,2\n" * 300_000)
    message = await fails(tmp_path, "big.csv")
    assert "is 1.1 MiB; read_csv reads files up to 1 MiB" in message


async def test_missing_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    assert "File not found: 'nope.csv'" in await fails(tmp_path, "nope.csv")
    assert "is not a file" in await fails(tmp_path, "folder")


async def test_paths_outside_the_read_roots_are_refused(tmp_path: Path) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    (inside / "link.csv").symlink_to(secret)
    assert "uses '..'" in await fails(inside, "../secret.csv")
    assert "outside the directories" in await fails(inside, str(secret))
    assert "symbolic link" in await fails(inside, "link.csv")
    assert "home directory" in await fails(inside, "~/x.csv")


# ---------------------------------------------------------------- through an agent


async def test_agent_reads_a_csv(tmp_path: Path) -> None:
    (tmp_path / "scores.csv").write_text("name,score\nAda,9\nBo,7\n")
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("read_csv", {"path": "scores.csv"})]),
            ScriptedReply(tool_calls=[ScriptedToolCall("read_csv", {"path": "../x.csv"})]),
            "done",
        ]
    )
    agent = Agent(model, tools=[tool_read_csv()], working_dir=tmp_path)
    result = await agent.run_async("summarise")
    ends = [e for e in result.events if e.type == "tool_end"]
    assert not ends[0].is_error
    assert ends[0].output.startswith('scores.csv: 2 rows × 2 columns (delimiter ",", UTF-8)')
    assert "| score | integer | 0 | 7 to 9 |" in ends[0].output
    assert ends[1].is_error and "'..'" in ends[1].output
