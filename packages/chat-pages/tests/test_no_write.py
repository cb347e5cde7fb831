"""F17: the reader writes nothing and opens only what it should.

Every reader call in this suite already runs inside the fingerprint and the inotify watch (helpers.World).
This file drives every call over the whole fixture tree with decoys around it, and proves that the two
checks themselves catch what they are there to catch (a check that cannot fail proves nothing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import World, fingerprint, materialise

from mosaic.chat_pages import SeatRegistration


def _decoys(world: World) -> dict[str, Path]:
    """Files no read may touch: outside the roots, a non-approved seat, an unsupported seat, a parent."""
    out = world.top / "outside"
    out.mkdir()
    parent = out / "parent.jsonl"
    parent.write_bytes((materialise(world.top, "proj-rpc", ["plain.jsonl"], name="src") /
                        ".pi/state/alpha/sessions/plain.jsonl").read_bytes())
    other_seat = materialise(world.top, "proj-rpc", ["abort.jsonl"], seat="beta")
    rocko = materialise(world.top, "proj-rpc", ["resumed.jsonl"], seat="rocko")
    return {"parent": parent, "beta": other_seat / ".pi/state/beta/sessions/abort.jsonl",
            "rocko": rocko / ".pi/state/rocko/sessions/resumed.jsonl"}


def test_F17_every_call_over_every_fixture_writes_nothing_and_opens_only_what_it_may(world: World) -> None:
    decoys = _decoys(world)
    roots = [materialise(world.top, p) for p in ("proj-rpc", "proj-sm", "proj-adv")]
    # parent-session.jsonl names a real session file outside the roots: it must never be opened.
    ps = roots[2] / ".pi/state/alpha/sessions/parent-session.jsonl"
    data = ps.read_bytes()
    nl = data.index(b"\n")
    h = json.loads(data[:nl])
    h["parentSession"] = str(decoys["parent"])
    ps.write_bytes(json.dumps(h, separators=(",", ":")).encode() + data[nl:])
    for r in roots:
        world.approve(r)
    world.approve(roots[0], seat="rocko")
    world.registrations.append(SeatRegistration("rocko", "claude-code", "/layout/repo", "proj-rpc",
                                                str(roots[0] / ".pi/state/rocko/sessions"), "2026-01-01T00:00:00Z"))
    cat = world.catalogue()
    opened_files = 0
    for row in cat["conversations"]:
        res = world.open(row["id"])
        if not res["ok"]:
            continue
        opened_files += 1
        for b in res["view"]["branches"]:
            r = world.open(row["id"], b["name"])
            while r["cursor"] is not None:
                r = world.next(r["cursor"]["id"], row["id"], b["name"])
            assert world.follow(r)["ok"]
    assert opened_files >= 40
    touched = set().union(*world.opened_log)
    for decoy in decoys.values():
        assert str(decoy) not in touched
    rocko_dir = str(roots[0] / ".pi/state/rocko")
    assert not any(p.startswith(rocko_dir) for p in touched)


def test_F17_the_fingerprint_sees_an_in_place_rewrite_that_keeps_size_and_mtime(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"abc\n")
    before = fingerprint(tmp_path)
    st = f.stat()
    f.write_bytes(b"abd\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fingerprint(tmp_path) != before
    before = fingerprint(tmp_path)
    (tmp_path / "new").mkdir()
    assert fingerprint(tmp_path) != before
    before = fingerprint(tmp_path)
    os.chmod(f, 0o600)
    assert fingerprint(tmp_path) != before


def test_F17_the_watch_fails_a_call_that_opens_a_forbidden_file(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl", "abort.jsonl"])
    world.approve(root)
    cid = world.cid(root, "plain.jsonl")
    sneaky = root / ".pi/state/alpha/sessions/abort.jsonl"
    real_open = world.reader.open

    def open_and_peek(**kw: object) -> dict[str, object]:
        with open(sneaky, "rb"):  # as root, mode 000 would not have stopped this
            pass
        return real_open(**kw)  # type: ignore[arg-type]

    world.reader.open = open_and_peek  # type: ignore[method-assign]
    with pytest.raises(AssertionError, match="opened files no read may touch"):
        world.open(cid)
    world.reader.open = real_open  # type: ignore[method-assign]
    assert world.open(cid)["ok"]
    assert str(root / ".pi/state/alpha/sessions/plain.jsonl") in world.opened_log[-1]  # the watch sees opens
    assert str(sneaky) not in world.opened_log[-1]
