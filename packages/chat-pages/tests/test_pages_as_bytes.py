"""F10, pages as bytes (issue 34): `Reader.open` and `Reader.next` with `as_json=True` give a result as its
JSON bytes, made from the parts' bytes without the part dicts. The contract: those bytes are exactly
`dump_bytes` of the dict result of the same call, for every page of every branch, on a first and a second
visit, across a follow, for refusals, and for the hostile shapes (lone surrogates, 4-byte characters,
escapes, a 20 MB line cut into fragments, parts and pages at their caps).

Two readers over the same roots and clock answer each call, one with dicts and one with bytes; the
cursor ids (random) are made the same in both by replaying one counter for `secrets.token_hex`, so every
byte of the two answers can be compared, and each reader walks on with its own cursors.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from helpers import CLAUDE_TREES, World, claude_tree, entry, header, materialise, write_session

from mosaic.chat_pages import create_reader
from mosaic.chat_pages.parts import MAX_PAGE_BYTES, MAX_PARTS_PER_PAGE, dump_bytes, dumps

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_reader.py"


class Twin:
    """Two readers over `world`'s roots and clock: `dicts` answers with dicts, `raw` with `as_json=True`.
    `call` makes the same call on both and asserts the bytes are `dump_bytes` of the dicts, which are
    themselves checked to be the plain encoding of the result (its parts as plain dicts)."""

    def __init__(self, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dicts = create_reader(world.roots, clock=world.clock)
        self.raw = create_reader(world.roots, clock=world.clock)
        self.n = 0
        self.compared = 0
        self.parts = 0
        monkeypatch.setattr(secrets, "token_hex", self._token)

    def _token(self, nbytes: int | None = None) -> str:
        self.n += 1
        return f"{self.n:0{2 * (nbytes or 32)}x}"

    def call(self, op: str, **kw: Any) -> dict[str, Any]:
        n = self.n
        result: dict[str, Any] = getattr(self.dicts, op)(**kw)
        want = dump_bytes(result)
        self.n = n  # the bytes reader issues the same cursor ids
        got = getattr(self.raw, op)(**kw, as_json=True)
        assert isinstance(got, bytes)
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
            raise AssertionError(f"{op} {kw}: the bytes differ at {at} of {len(want)}: "
                                 f"{got[max(0, at - 80):at + 80]!r} != {want[max(0, at - 80):at + 80]!r}")
        if result["ok"]:
            plain = {**result, "page": {**result["page"], "parts": [dict(p) for p in result["page"]["parts"]]}}
            assert dump_bytes(plain) == want  # the reference is the encoding of the dicts, not only their bytes
            self.parts += len(result["page"]["parts"])
        self.compared += 1
        return result

    def open(self, cid: str, branch: str | None = None, **kw: Any) -> dict[str, Any]:
        return self.call("open", conversation=cid, branch=branch, **kw)

    def next(self, cursor: str, cid: str, branch: str | None, **kw: Any) -> dict[str, Any]:
        return self.call("next", cursor=cursor, conversation=cid, branch=branch, **kw)

    def walk(self, cid: str, branch: str | None) -> tuple[int, dict[str, Any]]:
        """Every page of `branch` (None: the default), compared; (pages, the last result)."""
        res = self.open(cid, branch)
        pages = 1
        while res["ok"] and res["cursor"] is not None:
            res = self.next(res["cursor"]["id"], cid, res["page"]["branch"])
            pages += 1
        return pages, res

    def every_branch(self, cid: str, visits: int = 2) -> dict[str, dict[str, Any]]:
        """Every page of every branch, `visits` times (a first visit, then the kept parts); the last result
        of each branch's last visit, by branch."""
        first = self.open(cid)
        if not first["ok"]:
            return {}
        last: dict[str, dict[str, Any]] = {}
        for _ in range(visits):
            for b in first["view"]["branches"]:
                _, last[b["name"]] = self.walk(cid, b["name"])
        return last

    def follow(self, res: dict[str, Any]) -> dict[str, Any]:
        """Every page of a follow of `res` (a last page); the last result."""
        assert res["ok"] and res["follow"] is not None
        cid, branch = res["page"]["conversation"], res["page"]["branch"]
        res = self.next(res["follow"]["id"], cid, branch)
        while res["ok"] and res["cursor"] is not None:
            res = self.next(res["cursor"]["id"], cid, branch)
        return res


def _bench() -> Any:
    """The benchmark's generator of realistic sessions (bench/bench_reader.py: user, thinking, text, tool
    call, tool result, reply; 2- and 4-byte characters, escapes; forks)."""
    spec = importlib.util.spec_from_file_location("chat_pages_bench_reader", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _append(path: Path, *lines: bytes) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(lines))


def _msg(eid: str, parent: str | None, content: Any, role: str = "user") -> bytes:
    obj = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-11-30T09:00:01.000Z",
           "message": {"role": role, "content": content}}
    return dumps(obj).encode() + b"\n"  # as Pi writes it: raw UTF-8, a lone surrogate as its escape


def test_F10_every_page_of_every_fixture_branch_as_bytes_is_the_dict_page_serialized(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every conversation of the package's fixtures (Pi: proj-rpc, proj-sm, proj-adv, the refused ones
    too; Claude: every tree), every page of every branch on a first and a second visit, then a follow that
    finds nothing new: the bytes are `dump_bytes` of the dicts."""
    for proj in ("proj-rpc", "proj-sm", "proj-adv"):
        world.approve(materialise(world.top, proj))
    for tree in sorted(os.listdir(CLAUDE_TREES)):
        t = claude_tree(world.top, tree)
        world.approve_claude(t.project, t.claude, seat=t.expected["seat"])
    twin = Twin(world, monkeypatch)
    rows = [r for r in twin.dicts.catalogue()["conversations"] if r["kind"] == "conversation"]
    refused = 0
    for row in rows:
        last = twin.every_branch(row["id"])
        if not last:
            refused += 1
        for res in last.values():
            assert twin.follow(res)["page"]["parts"] == []
    assert len(rows) >= 60 and 5 <= refused < len(rows)
    assert twin.compared >= 300 and twin.parts >= 6_000


def test_F10_a_generated_session_as_bytes_every_page_of_every_branch_and_a_follow(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """A realistic session of about 2,900 entries and 5 MB with 3 forks (the benchmark's generator), whose
    part cache (half the file) cannot keep every item, so later branches render items again: every page of
    every branch twice, then follows (one line; then more than a page), all compared byte for byte."""
    bench = _bench()
    root = world.top / "gen"
    sessions = root / ".pi/state/alpha/sessions"
    sessions.mkdir(parents=True)
    made = bench.generate(sessions / "g.jsonl", os.path.realpath(root), target=5_000_000, fork_count=3)
    assert made["entries"] >= 2_500 and made["forks"] == 3
    world.approve(root)
    twin = Twin(world, monkeypatch)
    cid = world.cid(root, "g.jsonl")
    last = twin.every_branch(cid)
    assert len(last) == 4
    default = twin.open(cid)["view"]["defaultBranch"]
    res = last[default]
    _append(sessions / "g.jsonl", bench._follow_line(bench.res_leaf(res), 0))
    res = twin.follow(res)
    assert len(res["page"]["parts"]) == 1
    leaf = bench.res_leaf(res)
    lines = []
    for i in range(1, 260):  # more than two pages of parts: a follow hands out page cursors
        lines.append(bench._follow_line(leaf, i))
        leaf = f"z{os.getpid():x}-{i:07x}"
    _append(sessions / "g.jsonl", *lines)
    before = twin.compared
    res = twin.follow(res)
    assert twin.compared - before >= 3 and res["follow"] is not None
    for b in last:
        twin.walk(cid, b)  # every branch again in the grown snapshot
    assert twin.parts >= 15_000


def test_F10_hostile_shapes_as_bytes_are_the_dict_pages_serialized(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lone surrogates, 4-byte characters, escapes and control characters; a 20 MB line cut into
    fragments over several parts; an item of 150 blocks (three parts); pages at the 8 MiB cap and at the
    100-part cap; each on a first and a second visit (where a kept item's parts are its kept bytes)."""
    root = world.top / "p"
    odd = "a\ud800b \udfff 😀𝄞 \"q\" \\ / \n\t\r\x00\x01\x1f \u2028\u2029 é日本 \U0010ffff"
    lines = [header(root)]
    lines.append(_msg("blocks", None, [{"type": "text", "text": f"{odd} {i}"} for i in range(150)]))
    lines.append(_msg("odd", "blocks", [{"type": "text", "text": odd * 50},
                                        {"type": "toolCall", "id": "call_1|fc_1", "name": "bash",
                                         "arguments": {"cmd": odd, "n": [1, 2.5, None, True]}}], "assistant"))
    # 20 MB: 2-, 3- and 4-byte characters, escapes, a lone high surrogate every 64 KB
    big = ((("😀é日 \\\"\n" + "x" * 40 + " ") * 1_200 + "\ud83d") * 300)
    lines.append(_msg("long", "odd", [{"type": "text", "text": big}]))
    del big
    parent = "long"
    for i in range(8):  # 1.5 MB each: pages fill to the 8 MiB cap
        lines.append(_msg(f"e{i}", parent, [{"type": "text", "text": "x" * 1_500_000 + odd + str(i)}]))
        parent = f"e{i}"
    for i in range(250):  # short items: pages of 100 parts
        lines.append(_msg(f"s{i}", parent, [{"type": "text", "text": f"{odd[i % len(odd):]} {i}"}]))
        parent = f"s{i}"
    write_session(root, "s.jsonl", lines)
    world.approve(root)
    twin = Twin(world, monkeypatch)
    cid = world.cid(root, "s.jsonl")
    sizes: list[int] = []
    counts: list[int] = []
    for _ in range(2):  # a first visit, then a second (the items the part cache kept: all but the long one)
        res = twin.open(cid)
        while True:
            sizes.append(len(dump_bytes(res["page"])))
            counts.append(len(res["page"]["parts"]))
            if res["cursor"] is None:
                break
            res = twin.next(res["cursor"]["id"], cid, res["page"]["branch"])
    assert res["view"]["branchCount"] == 1 and res["view"]["unreadableLineCount"] == 0
    assert max(sizes) > MAX_PAGE_BYTES - (2 << 20) and max(sizes) <= MAX_PAGE_BYTES
    assert counts.count(MAX_PARTS_PER_PAGE) >= 4
    _append(root / ".pi/state/alpha/sessions/s.jsonl", _msg("after", parent, [{"type": "text", "text": odd}]))
    assert len(twin.follow(res)["page"]["parts"]) == 1


def test_F10_refusals_as_bytes_are_the_dict_refusals_serialized(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal `open` and `next` give is the same refusal as bytes, and consumes a cursor alike."""
    root = world.top / "p"
    path = write_session(root, "s.jsonl", [header(root)] + [entry(f"e{i}", f"e{i - 1}" if i else None, f"t{i}")
                                                         for i in range(150)])
    world.approve(root)
    twin = Twin(world, monkeypatch)
    cid = world.cid(root, "s.jsonl")
    codes = []
    codes.append(twin.open("pi-" + "0" * 40)["refusal"]["code"])
    codes.append(twin.open(cid, "nope")["refusal"]["code"])
    codes.append(twin.open(cid, actor="someone")["refusal"]["code"])
    codes.append(twin.open(cid, purpose="other")["refusal"]["code"])
    res = twin.open(cid)
    codes.append(twin.next("c-" + "1" * 32, cid, "main")["refusal"]["code"])
    codes.append(twin.next(res["cursor"]["id"], cid, "other")["refusal"]["code"])  # foreign: not consumed
    world.clock.advance(3600)
    codes.append(twin.next(res["cursor"]["id"], cid, "main")["refusal"]["code"])
    res = twin.open(cid)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"t1", b"T1"))  # in place, the same length
    codes.append(twin.next(res["cursor"]["id"], cid, "main")["refusal"]["code"])
    codes.append(twin.next(res["cursor"]["id"], cid, "main")["refusal"]["code"])  # dropped with the refusal
    assert codes == ["unknown-conversation", "unknown-branch", "unknown-actor", "unsupported-purpose",
                     "cursor-unknown", "cursor-foreign", "cursor-expired", "source-replaced", "cursor-unknown"]
