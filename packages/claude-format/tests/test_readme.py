"""The package README's refusal and notice tables are the code tables; the refusal is the shared kind; the
API table is exactly the top level."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.claude_format as pkg
from mosaic.claude_format import TranscriptRefusal, parse
from mosaic.claude_format.model import NOTICE_CODES
from mosaic.safe_open import Refusal, SafeOpenRefusal

README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^\| `([a-z-]+)` \|(.*)\| (yes|no) \|$")


def table(marker: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"<!-- {marker}:start -->")
    end = text.index(f"<!-- {marker}:end -->")
    return [row for row in text[start:end].splitlines() if row.startswith("| `")]


def test_readme_refusal_table_is_the_codes_table() -> None:
    rows = {}
    for row in table("refusals"):
        m = ROW.match(row)
        assert m, row
        rows[m.group(1)] = m.group(3) == "yes"
    assert rows == dict(TranscriptRefusal.CODES)


def test_readme_notice_table_lists_every_notice_code() -> None:
    codes = [re.match(r"^\| `([a-z-]+)` \|", row).group(1) for row in table("notices")]  # type: ignore[union-attr]
    assert sorted(set(codes)) == sorted(NOTICE_CODES)


def test_refusal_values_carry_the_table_flag_and_are_shared_refusals_returned_by_value() -> None:
    for code, flag in TranscriptRefusal.CODES.items():
        assert TranscriptRefusal(code, "m").to_dict() == {"code": code, "reconcile": flag, "message": "m"}
    with pytest.raises(ValueError):
        TranscriptRefusal("unsafe-path", "m")  # a code outside the table is a programming error
    line = b'{"type":"user","uuid":"a","parentUuid":null,"version":"2.1.300","message":{"role":"user","content":"x"}}\n'
    returned = parse(line)
    assert isinstance(returned, TranscriptRefusal) and isinstance(returned, Refusal)
    assert returned == parse(line) and hash(returned) == hash(parse(line))
    assert returned != SafeOpenRefusal("unavailable", returned.message)


def test_importing_claude_format_loads_no_cffi_and_not_the_parser() -> None:
    code = ("import sys, mosaic.claude_format; print('mosaic.safe_open' in sys.modules, 'cffi' in sys.modules, "
            "'msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "False", "False"]


def test_readme_api_table_is_exactly_the_public_surface() -> None:
    text = README.read_text(encoding="utf-8")
    api = text[text.index("## API"):]
    api = api[: api.index("\n\n", api.index("| name |"))]
    names: set[str] = set()
    for row in api.splitlines()[2:]:
        for span in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", span)
            if m:
                names.add(m.group())
    assert names == set(pkg.__all__)
