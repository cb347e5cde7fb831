"""One refusal family (docs/design.md, "safe-open: `Refusal`"): a refusal from every package is caught by
one `except` and serialises one way.

Each package's refusal class subclasses `mosaic.safe_open.Refusal`; this test makes one refusal of each, the
way that package makes it (a real refusing call where one is cheap, the class otherwise), and catches it
with `except Refusal`.
"""

from __future__ import annotations

import pathlib

import pytest

from mosaic.cgroup_cohort import CohortRefusal
from mosaic.chat_pages import ReaderRefusal
from mosaic.pi_format import FormatRefusal, parse
from mosaic.pi_rpc import PiRpcRefusal
from mosaic.pi_rpc.seal import check_seal
from mosaic.safe_open import Refusal, SafeOpenRefusal, open_root
from mosaic.writer_claim import ClaimRefusal


def _raise_safe_open(tmp: pathlib.Path) -> None:
    with open_root(str(tmp / "missing")):
        pass


def _raise_format(tmp: pathlib.Path) -> None:
    result = parse(b"not a session\n")
    assert isinstance(result, FormatRefusal)  # pi-format returns its refusal: a caller may raise it
    raise result


def _raise_pi_rpc(tmp: pathlib.Path) -> None:
    refusal = check_seal(["--mode", "rpc", "--extension", "x.js"])
    assert isinstance(refusal, PiRpcRefusal)  # check_seal returns its refusal: a caller may raise it
    raise refusal


RAISERS = {
    "safe-open": _raise_safe_open,
    "pi-format": _raise_format,
    "pi-rpc": _raise_pi_rpc,
}

CLASSES: dict[str, tuple[type[Refusal], str]] = {
    "safe-open": (SafeOpenRefusal, "unsafe-path"),
    "pi-format": (FormatRefusal, "not-a-pi-session"),
    "chat-pages": (ReaderRefusal, "unknown-conversation"),
    "writer-claim": (ClaimRefusal, "already-active"),
    "cgroup-cohort": (CohortRefusal, "foreign-host"),
    "pi-rpc": (PiRpcRefusal, "unsealed-engine"),
}


@pytest.mark.parametrize("package", sorted(CLASSES))
def test_one_except_catches_a_refusal_of_every_package(package: str) -> None:
    cls, code = CLASSES[package]
    assert issubclass(cls, Refusal)
    try:
        raise cls(code, f"a {package} refusal")
    except Refusal as caught:  # the one except a caller needs
        assert type(caught) is cls
        assert caught.to_dict() == {"code": code, "reconcile": cls.CODES[code], "message": f"a {package} refusal"}


@pytest.mark.parametrize("package", sorted(RAISERS))
def test_real_refusing_calls_are_caught_by_the_base(package: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(Refusal) as info:
        RAISERS[package](tmp_path)
    assert set(info.value.to_dict()) == {"code", "reconcile", "message"}
    assert info.value.code in type(info.value).CODES


def test_every_code_table_is_a_str_to_bool_table() -> None:
    for cls, _ in CLASSES.values():
        assert cls.CODES and all(isinstance(k, str) and isinstance(v, bool) for k, v in cls.CODES.items())
