"""The package README's refusal and notice tables are the code tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mosaic.pi_format import NOTICE_CODES, FormatRefusal

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
    assert rows == dict(FormatRefusal.CODES)


def test_readme_notice_table_lists_every_notice_code() -> None:
    codes = [re.match(r"^\| `([a-z-]+)` \|", row).group(1) for row in table("notices")]  # type: ignore[union-attr]
    assert sorted(codes) == sorted(NOTICE_CODES)


def test_refusal_values_carry_the_table_flag() -> None:
    for code, flag in FormatRefusal.CODES.items():
        refusal = FormatRefusal.of(code, "m")
        assert refusal.to_dict() == {"code": code, "reconcile": flag, "message": "m"}
    with pytest.raises(ValueError):
        FormatRefusal.of("unsafe-path", "m")  # a code outside the table is a programming error
    with pytest.raises(ValueError):
        FormatRefusal("unsafe-path", False, "m")
