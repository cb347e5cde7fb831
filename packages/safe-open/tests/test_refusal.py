"""The Refusal base every package subclasses, and safe-open's code table."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import ClassVar

import pytest

from mosaic.safe_open import Refusal, SafeOpenRefusal


def test_safe_open_code_table_is_the_seed_rows() -> None:
    # Seed README, "Refusal codes": the four rows the "Opening a file" rules produce; none reconciles.
    assert dict(SafeOpenRefusal.CODES) == {
        "unsafe-path": False,
        "too-large": False,
        "unreadable": False,
        "unavailable": False,
    }


def test_fields_default_reconcile_and_to_dict() -> None:
    r = SafeOpenRefusal("too-large", "x.jsonl is 268435457 bytes, over 256 MiB")
    assert isinstance(r, Refusal) and isinstance(r, Exception)
    assert (r.code, r.reconcile, r.message) == (
        "too-large",
        False,
        "x.jsonl is 268435457 bytes, over 256 MiB",
    )
    assert r.to_dict() == {"code": "too-large", "reconcile": False, "message": r.message}
    assert str(r) == f"too-large: {r.message}"
    assert r.to_dict() == {"code": "too-large", "reconcile": False, "message": r.message}
    assert SafeOpenRefusal("unavailable", "m", reconcile=True).reconcile is True


def test_unknown_code_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        SafeOpenRefusal("source-replaced", "not a safe-open code")
    with pytest.raises(ValueError):
        Refusal("unsafe-path", "the base class has no codes")
    with pytest.raises(TypeError):
        SafeOpenRefusal("unsafe-path", "m", reconcile="yes")  # type: ignore[arg-type]


class ReaderRefusal(Refusal):
    CODES: ClassVar[Mapping[str, bool]] = {"source-replaced": True, "unavailable": False}


def test_subclass_table_defaults_and_is_frozen() -> None:
    r = ReaderRefusal("source-replaced", "prefix digest differs")
    assert r.reconcile is True
    assert isinstance(r, Refusal) and not isinstance(r, SafeOpenRefusal)
    with pytest.raises(ValueError):
        ReaderRefusal("too-large", "not in this table")
    with pytest.raises(TypeError):
        ReaderRefusal.CODES["new"] = False  # type: ignore[index]


def test_bad_code_tables_are_rejected_at_class_creation() -> None:
    with pytest.raises(TypeError):

        class Bad(Refusal):
            CODES: ClassVar[Mapping[str, bool]] = {"x": "yes"}  # type: ignore[dict-item]


@pytest.mark.parametrize("reconcile", [None, True])
def test_refusals_pickle_with_all_fields(reconcile: bool | None) -> None:
    for r in (
        SafeOpenRefusal("unreadable", "EACCES", reconcile=reconcile),
        ReaderRefusal("unavailable", "gone"),
    ):
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is type(r)
        assert back.to_dict() == r.to_dict()
