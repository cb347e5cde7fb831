"""The package's public face: a short top level, named public modules for the rest, one object per name."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import mosaic.claude_format

PACKAGE = Path(mosaic.claude_format.__file__).parent
PUBLIC = ["mosaic.claude_format", "mosaic.claude_format.ids", "mosaic.claude_format.model"]


def test_the_public_modules_are_every_module_without_an_underscore() -> None:
    found = {f"mosaic.claude_format.{p.stem}" for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
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


def test_the_top_level_is_short_and_says_what_a_reader_needs() -> None:
    top = set(mosaic.claude_format.__all__)
    assert len(top) <= 20
    assert {"parse", "parse_appended", "Parsed", "TranscriptRefusal", "PINNED_VERSION"} <= top
    assert mosaic.claude_format.PINNED_VERSION == "2.1.283"


def test_a_name_two_modules_export_is_one_object() -> None:
    homes: dict[str, tuple[str, object]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if attr in homes:
                assert homes[attr][1] is value, f"{attr}: {homes[attr][0]} and {name} differ"
            homes[attr] = (name, value)
