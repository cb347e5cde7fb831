"""The package README's refusal and notice tables are the code tables; the refusal is the shared kind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.pi_format as pkg
from mosaic.pi_format import FormatRefusal, parse
from mosaic.pi_format.model import NOTICE_CODES
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
    assert rows == dict(FormatRefusal.CODES)


def test_readme_notice_table_lists_every_notice_code() -> None:
    codes = [re.match(r"^\| `([a-z-]+)` \|", row).group(1) for row in table("notices")]  # type: ignore[union-attr]
    assert sorted(codes) == sorted(NOTICE_CODES)


def test_refusal_values_carry_the_table_flag() -> None:
    for code, flag in FormatRefusal.CODES.items():
        refusal = FormatRefusal(code, "m")
        assert refusal.to_dict() == {"code": code, "reconcile": flag, "message": "m"}
    with pytest.raises(ValueError):
        FormatRefusal("unsafe-path", "m")  # a code outside the table is a programming error


def test_format_refusal_is_a_shared_refusal_returned_by_value() -> None:
    """DESIGN.md principle 2: one refusal family. parse() returns the refusal (it never raises it), and two
    refusals of the same code and message compare equal wherever they were made."""
    returned = parse(b"")
    assert isinstance(returned, FormatRefusal) and isinstance(returned, Refusal)
    assert returned == FormatRefusal("incomplete-header", "line 1 is not complete yet (no newline)")
    assert hash(returned) == hash(FormatRefusal("incomplete-header", "line 1 is not complete yet (no newline)"))
    assert returned != FormatRefusal("incomplete-header", "another message")
    assert returned != SafeOpenRefusal("unavailable", "line 1 is not complete yet (no newline)")


def test_importing_pi_format_loads_no_cffi() -> None:
    """The README's promise for the dependency on safe-open: only the Refusal base is used, and importing
    it loads no cffi (the root-opening names load the bindings on first use)."""
    code = "import sys, mosaic.pi_format; print('mosaic.safe_open' in sys.modules, 'cffi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_readme_api_table_is_exactly_the_public_surface() -> None:
    """The public surface: __all__ lists only what a caller needs and the README's API table
    documents each name (the leading identifier of each `span` in its first column)."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## API") :]
    table = table[: table.index("\n\n", table.index("| name |"))]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        for span in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", span)
            if m and not span.startswith("python "):
                names.add(m.group())
    assert names == set(pkg.__all__)
    for name in pkg.__all__:
        assert hasattr(pkg, name), name
