"""`mosaic.safe_open.ids.safe_id` (issue 31: moved down from pi-format so the controller's client and the
reader share it): a short CHAT-01 id is kept, anything else is `h-` plus 40 hex of its SHA-256."""

from __future__ import annotations

import hashlib
import re

import pytest

from mosaic.safe_open.ids import HASH_PREFIX, safe_id

HASHED = re.compile(r"h-[0-9a-f]{40}")


@pytest.mark.parametrize("raw", ["31125ff3", "a" * 96, "call_fake_2", "A.b:c-d_e"])
def test_a_short_chat01_id_is_kept_verbatim_up_to_96_characters(raw: str) -> None:
    assert safe_id(raw) == raw


@pytest.mark.parametrize("raw", ["a" * 97, "call_x|fc_y", "h-0123", "", "-lead", "ünï", "a\n", "x\ud800"])
def test_anything_else_is_the_hash_prefix_and_40_hex_of_its_sha256(raw: str) -> None:
    out = safe_id(raw)
    assert HASHED.fullmatch(out) and out.startswith(HASH_PREFIX)
    assert out == HASH_PREFIX + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]
