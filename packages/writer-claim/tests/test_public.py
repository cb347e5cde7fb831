"""The package's public face: a short top level, named public modules for the rest, one object per name.

What a controller needs (the store and its claims, the keys, the binding and pins, the proof, the states,
the refusal and the write error) is ``mosaic.writer_claim.__all__``; everything else public is in a named
module (README "Public modules"). Every public module has ``__all__`` and a ``__dir__`` that lists exactly
it, and every name in it resolves. A name two public modules export is the same object in both.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import mosaic.writer_claim

PACKAGE = Path(mosaic.writer_claim.__file__).parent
PUBLIC = ["mosaic.writer_claim", *(f"mosaic.writer_claim.{m}" for m in ("cli", "internals", "model", "store"))]


def test_the_public_modules_are_every_module_without_an_underscore() -> None:
    found = {f"mosaic.writer_claim.{p.stem}" for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    assert found == set(PUBLIC[1:])


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_module_lists_what_it_exports_and_dir_says_exactly_that(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported and len(exported) == len(set(exported)), name
    assert dir(module) == sorted(exported)
    for attr in exported:
        assert not attr.startswith("_"), attr
        getattr(module, attr)


def test_the_top_level_is_short_and_says_what_a_controller_needs() -> None:
    top = set(mosaic.writer_claim.__all__)
    assert len(top) <= 20
    assert {"ClaimStore", "Claim", "SeatKey", "SessionKey", "Binding", "Pins", "ProofRef", "ProofKind", "State",
            "Outcome", "ClaimRefusal", "ClaimWriteError", "CohortProbe", "UnitObservation"} <= top


def test_a_name_two_modules_export_is_one_object() -> None:
    homes: dict[str, tuple[str, object]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if attr in homes:
                assert homes[attr][1] is value, f"{attr}: {homes[attr][0]} and {name} differ"
            homes[attr] = (name, value)
