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
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import CLAUDE_TREES, FIXTURES, World, claude_tree, entry, header, materialise, write_session

from mosaic.chat_pages import create_reader
from mosaic.chat_pages.parts import MAX_PAGE_BYTES, MAX_PARTS_PER_PAGE, dump_bytes, dumps
from mosaic.chat_pages.testing import encoded_parts, json_part

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
    part cache (a quarter of the file) cannot keep every item, so later branches render items again: every page of
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


# -- parts spliced from the file's bytes (issue 34): `json_part` over pi-format's `render_json` -------------


def _spliced_parts(data: bytes, project: str = "/tmp/p") -> tuple[int, int]:
    """Every entry of every branch of the session `data`: where pi-format cuts its JSON and `json_part`
    splices a part, that part and its digest key are `encoded_parts`' one part and `"id@line"`; (items,
    items spliced). A refused file has none: (0, 0)."""
    import mosaic.pi_format as pi_format

    parsed = pi_format.parse(data, project=project)
    if not isinstance(parsed, pi_format.Parsed):
        return 0, 0
    seen: set[int] = set()
    spliced = 0
    for branch in parsed.branches.values():
        for ref in branch.refs_from(0, 1 << 30):
            if ref in seen:
                continue
            seen.add(ref)
            ij = parsed.render_json(ref)
            got = None if ij is None else json_part(ij)
            if got is None:
                continue
            item = parsed.render(ref)
            want = encoded_parts(item)
            assert [raw for _, raw in want] == [bytes(raw) for raw in got[1]], ref
            assert got[0] == f"{item.id}@{item.line}\n".encode()
            spliced += 1
    return len(seen), spliced


def test_F10_spliced_parts_are_the_rendered_parts_for_every_fixture_and_a_generated_session() -> None:
    """Every entry of every Pi fixture (the pinned Pi's sessions and the adversarial files) and of a
    generated session of the benchmark's shapes: a spliced part is byte for byte the rendered one, and
    what Pi writes is spliced (all but a few of the adversarial files' entries)."""
    total = spliced = 0
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        if "claude-2.1.283" in path.parts:
            continue
        n, s = _spliced_parts(path.read_bytes(), project="/")
        total, spliced = total + n, spliced + s
    assert total >= 500 and spliced >= 0.9 * total
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.jsonl"
        made = _bench().generate(path, "/tmp/p", target=600_000, fork_count=2)
        n, s = _spliced_parts(path.read_bytes())
    assert n >= made["entries"] - 2 and s == n > 0  # every item (the two hidden entries show none)


def _line_of(content: Any, role: str = "user", **message: Any) -> bytes:
    return _msg("e1", None, content, role)[:-3] + (b"," + dumps(message).encode()[1:-1] if message else b"") + b"}}\n"


def _one_part(tmp: Path, content: Any, role: str = "user", **message: Any) -> tuple[Any, list[bytes]]:
    """(json_part of the one entry, encoded_parts' bytes of it)."""
    import mosaic.pi_format as pi_format

    data = header(tmp) + _line_of(content, role, **message)
    parsed = pi_format.parse(data, project=str(tmp))
    assert isinstance(parsed, pi_format.Parsed)
    (ref,) = parsed.branches["main"].refs_from(0, 10)
    ij = parsed.render_json(ref)
    assert ij is not None
    got = json_part(ij)
    return None if got is None else (got[0], bytes(got[1][0])), [raw for _, raw in encoded_parts(parsed.render(ref))]


def test_F10_a_long_string_is_spliced_while_inline_and_left_to_the_fragments_past_it(tmp_path: Path) -> None:
    """A text up to 262,144 UTF-16 units and 1 MiB of JSON stays inline and is spliced; past either limit
    (or an attribute past 64 KiB) it needs fragments, which `json_part` cuts from the token's bytes
    (`_long_string`, `_rawtext.raw_item_parts`): the fragments `encoded_parts` makes of the decoded text."""
    for text in ("x" * 262_144, "😀" * 131_072, "\n" * 174_762):  # 262,144 units; 1 MiB of JSON (6 B each)
        got, want = _one_part(tmp_path, [{"type": "text", "text": text}])
        assert got is not None and [got[1]] == want
    for text in ("x" * 262_145, "😀" * 131_073, "\x01" * 174_763):  # one unit too many; over 1 MiB of JSON
        got, want = _one_part(tmp_path, [{"type": "text", "text": text}])
        assert got is not None and [got[1]] == want and b'"kind":"fragment"' in want[0]
    got, want = _one_part(tmp_path, "x", "assistant", stopReason="s" * 65_534)  # 64 KiB of JSON: inline
    assert got is not None and [got[1]] == want
    got, want = _one_part(tmp_path, "x", "assistant", stopReason="s" * 65_535)
    assert got is not None and [got[1]] == want and b'"attrs.stopReason"' in want[0]
    args = {"p": "q" * 300_000}  # its JSON text is a body string over 262,144 units
    got, want = _one_part(tmp_path, [{"type": "toolCall", "id": "c", "name": "n", "arguments": args}], "assistant")
    assert got is not None and [got[1]] == want and b'"field":"arguments"' in want[0]


def test_F10_parts_of_65_blocks_or_4_MiB_are_left_to_the_general_path(tmp_path: Path) -> None:
    """64 blocks are one part, spliced; 65 are two parts: None. A part of exactly 4 MiB with several blocks
    is two parts in `encoded_parts` (its cut counts `"last":false`): None; one byte less is spliced."""
    got, want = _one_part(tmp_path, [{"type": "text", "text": f"t{i}"} for i in range(64)])
    assert got is not None and [got[1]] == want
    got, want = _one_part(tmp_path, [{"type": "text", "text": f"t{i}"} for i in range(65)])
    assert got is None and len(want) == 2
    big = [{"type": "text", "text": "😀" * 130_000} for _ in range(8)]  # 8 x 520,002 bytes of JSON
    got, _ = _one_part(tmp_path, [*big, {"type": "text", "text": ""}])
    assert got is not None
    pad = (4 << 20) - len(got[1])
    got, want = _one_part(tmp_path, [*big, {"type": "text", "text": "y" * pad}])
    assert got is None and len(want) == 2 and len(want[0]) + len(want[1]) > 4 << 20
    got, want = _one_part(tmp_path, [*big, {"type": "text", "text": "y" * (pad - 1)}])
    assert got is not None and [got[1]] == want and len(got[1]) == (4 << 20) - 1


def test_F10_a_long_text_is_kept_as_a_view_of_the_file_not_a_copy(tmp_path: Path) -> None:
    """A text over 512 bytes of JSON is spliced as a view of the file's bytes (the part is not `bytes`: its
    own bytes between views), so the part cache keeps no second copy of it; a short one is copied. Either
    way the part's JSON is `encoded_parts`' bytes."""
    import mosaic.pi_format as pi_format

    for text, viewed in (("é" * 300, True), ("x" * 100, False)):
        data = header(tmp_path) + _line_of([{"type": "text", "text": text}, {"type": "thinking", "thinking": text}])
        parsed = pi_format.parse(data, project=str(tmp_path))
        assert isinstance(parsed, pi_format.Parsed)
        (ref,) = parsed.branches["main"].refs_from(0, 10)
        ij = parsed.render_json(ref)
        got = None if ij is None else json_part(ij)
        assert got is not None and len(got[1]) == 1
        (part,) = got[1]
        assert (type(part) is not bytes) == viewed
        assert bytes(part) == encoded_parts(parsed.render(ref))[0][1] and len(part) == len(bytes(part))


def test_F10_tool_call_arguments_are_spliced_as_json_text(tmp_path: Path) -> None:
    """A toolCall's arguments travel as their JSON text: spliced, its quotes and backslashes escaped, the
    same bytes as `encoded_parts` (which writes the decoded arguments with Python's json)."""
    args = {"cmd": "printf \"a\\tb\"\n", "paths": ["/x", "é日😀"], "n": 3, "f": 2.5, "ok": True, "none": None}
    got, want = _one_part(tmp_path, [{"type": "toolCall", "id": "call_1|fc_1", "name": "bash", "arguments": args}],
                          "assistant")
    assert got is not None and [got[1]] == want
    assert got[1].endswith(b'"arguments":' + dumps(dumps(args)).encode() + b',"block":0}]}')


def test_F10_dict_pages_read_back_the_spliced_parts_a_bytes_page_kept(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """One reader serves every page as bytes (its part cache then holds spliced parts, long texts as views of
    the file), then every page again as dicts: each dict page, read back from those kept parts, is the page
    a fresh reader makes, and serializes to the bytes page."""
    bench = _bench()
    root = world.top / "gen"
    sessions = root / ".pi/state/alpha/sessions"
    sessions.mkdir(parents=True)
    bench.generate(sessions / "g.jsonl", os.path.realpath(root), target=400_000, fork_count=1)
    world.approve(root)
    twin = Twin(world, monkeypatch)
    cid = world.cid(root, "g.jsonl")
    served: list[bytes] = []
    res = twin.raw.open(conversation=cid, as_json=True)
    while True:
        served.append(res)
        cursor = json.loads(res)["cursor"]
        if cursor is None:
            break
        res = twin.raw.next(cursor=cursor["id"], conversation=cid, branch="main", as_json=True)
    twin.n = 0
    again = twin.raw.open(conversation=cid)
    twin.n = 0
    fresh = twin.dicts.open(conversation=cid)
    pages = 0
    while True:
        assert again == fresh and dump_bytes(again) == dump_bytes(fresh)
        pages += 1
        if again["cursor"] is None:
            break
        n = twin.n
        again = twin.raw.next(cursor=again["cursor"]["id"], conversation=cid, branch="main")
        twin.n = n
        fresh = twin.dicts.next(cursor=fresh["cursor"]["id"], conversation=cid, branch="main")
    assert pages == len(served) >= 3
