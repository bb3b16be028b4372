"""The generated tables of docs/cli.md (engine options, curator options): each sits between
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers, is checked by a test against the option
classes, and is rewritten by running that test module as a script."""

from __future__ import annotations

import pathlib
import re

CLI_DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _pattern(marker: str) -> str:
    return rf"(<!-- {marker}:begin -->\n)(.*?)(\n<!-- {marker}:end -->)"


def check_table(marker: str, table: str, script: str) -> None:
    """Fail unless docs/cli.md's ``marker`` table is ``table``; ``script`` rewrites it."""
    match = re.search(_pattern(marker), CLI_DOC.read_text(), re.S)
    assert match, f"docs/cli.md lacks the {marker} table markers"
    assert match.group(2).strip() == table, f"docs/cli.md's {marker} table is stale: regenerate it with python {script}"


def rewrite_table(marker: str, table: str) -> None:
    text = CLI_DOC.read_text()
    CLI_DOC.write_text(re.sub(_pattern(marker), lambda m: m.group(1) + table + m.group(3), text, flags=re.S))
