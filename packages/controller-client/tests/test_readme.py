"""The README's refusal tables are the code's: `ControlRefusal.CODES` (the controller's, which every client
shares) and `ClientRefusal.CODES` (this library's own), each code with its reconcile flag."""

from __future__ import annotations

from pathlib import Path

from mosaic.controller_client import ClientRefusal, ControlRefusal

README = Path(__file__).resolve().parent.parent / "README.md"


def tables_after(heading: str) -> list[list[list[str]]]:
    """The tables under `heading` (to the next heading of any level), each as its body rows' cells."""
    lines = README.read_text(encoding="utf-8").splitlines()
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            current.append([c.strip() for c in line.strip().strip("|").split("|")])
        else:
            current = None
    return [rows[2:] for rows in tables]


def test_the_readme_refusal_tables_are_the_code_tables() -> None:
    control, client = tables_after("## Refusals")
    assert {r[0].strip("`"): r[1] == "true" for r in control} == dict(ControlRefusal.CODES)
    assert {r[0].strip("`"): r[1] == "true" for r in client} == dict(ClientRefusal.CODES)
