"""Property tests (hypothesis): the prefix property of branch names, and fuzzing that never raises.

Failures print the falsifying example and the seed to reproduce it (hypothesis' default output).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from helpers import DATA, HEADER, check_invariants, check_result, line, ok, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mosaic.pi_format import FormatRefusal, Parsed, parse
from mosaic.pi_format.model import Item

# No example database: the tests write nothing into the repository. print_blob lets a failure be replayed.
SETTINGS = settings(deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GARBAGE = st.one_of(
    st.sampled_from([b"", b"   ", b"{", b"garbage", b"[]", b"42", b'{"no":"id"}', b'{"id":5}', b"\xff\xfe\xfd",
                     b'{"type":"message","id":"zz","parentId":nul', json.dumps(HEADER).encode()]),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")),
)

ROLE_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1},
    {"role": "user", "content": "plain"},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "r", "redacted": True},
                                      {"type": "toolCall", "id": "call_1|fc_2", "name": "bash",
                                       "arguments": {"command": "ls"}}], "stopReason": "toolUse"},
    {"role": "toolResult", "toolCallId": "call_1|fc_2", "toolName": "bash",
     "content": [{"type": "text", "text": "out"}, {"type": "image", "data": "", "mimeType": "image/png"}],
     "isError": False},
    {"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0},
    {"role": "custom", "content": "x"},
]

OTHER_ENTRIES: list[dict[str, Any]] = [
    {"type": "model_change", "provider": "p", "modelId": "m"},
    {"type": "thinking_level_change", "thinkingLevel": "off"},
    {"type": "compaction", "summary": "s", "firstKeptEntryId": "0000", "tokensBefore": 9},
    {"type": "branch_summary", "fromId": "0001", "summary": "b"},
    {"type": "custom_message", "customType": "e", "content": "shown", "display": True},
    {"type": "custom_message", "customType": "e", "content": "hidden", "display": False},
    {"type": "label", "targetId": "0000", "label": "l"},
    {"type": "brand_new_type"},
]


@st.composite
def pi_like_lines(draw: st.DrawFn, max_lines: int = 24) -> list[Any]:
    """Lines as Pi writes them (unique ids, a parent always earlier or missing), plus malformed lines."""
    n = draw(st.integers(0, max_lines))
    lines: list[Any] = []
    ids: list[str] = []
    for k in range(n):
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(GARBAGE))
            continue
        eid = draw(st.sampled_from([f"{k:08x}", f"e{k}|x", "h-" + str(k), f"{k}" + "l" * 120]))
        choice = draw(st.integers(0, 9))
        if not ids or choice == 0:
            parent: str | None = None
        elif choice == 1:
            parent = f"missing-{k}"
        elif choice <= 4:
            parent = draw(st.sampled_from(ids))
        else:
            parent = ids[-1]
        if draw(st.booleans()):
            body: dict[str, Any] = {"type": "message", "message": draw(st.sampled_from(ROLE_MESSAGES))}
        else:
            body = dict(draw(st.sampled_from(OTHER_ENTRIES)))
        lines.append({**body, "id": eid, "parentId": parent, "timestamp": f"T{k}"})
        ids.append(eid)
    return lines


def upto(item: Item, last_line: int) -> tuple[Any, ...]:
    """An item as a prefix ending at `last_line` must hold it: the same item, except that a run of
    unreadable lines (one malformed-line notice) that goes on past the cut covers only the lines up to it."""
    n = item.notice
    if n is not None and n.code == "malformed-line":
        assert n.through is not None
        return (item.id, item.line, "run", min(n.through, last_line))
    return (item.id, item.line, item)


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == 0x0A]


@settings(SETTINGS, max_examples=250)
@given(pi_like_lines(), st.data())
def test_every_prefix_branch_is_the_start_of_the_same_named_branch(lines: list[Any], data: st.DataObject) -> None:
    forked = data.draw(st.booleans(), label="forked")
    blob = session(*lines, header={**HEADER, "parentSession": "/scratch/proj/old.jsonl"} if forked else None)
    full = ok(parse(blob))
    check_invariants(full)
    for cut in line_ends(blob):
        part = ok(parse(blob[:cut]))
        last_line = blob[:cut].count(b"\n")
        for name, branch in part.branches.items():
            assert name in full.branches, (cut, name)
            whole = [upto(i, last_line) for i in full.branches[name].items]
            mine = [upto(i, last_line) for i in branch.items]
            assert whole[: len(mine)] == mine, (cut, name)
            # The prefix holds exactly the branch's items up to the cut.
            assert [i for i in whole if i[1] <= last_line] == mine, (cut, name)
        # A cut inside the next line reads the same, and says it is incomplete.
        if cut < len(blob):
            extra = data.draw(st.integers(1, blob.index(b"\n", cut) - cut + 1), label="partial")
            torn = ok(parse(blob[: cut + extra]))
            complete = extra == blob.index(b"\n", cut) - cut + 1
            assert torn.incomplete is (not complete)
            if not complete:
                assert {n: b.item_ids for n, b in torn.branches.items()} == \
                    {n: b.item_ids for n, b in part.branches.items()}


@st.composite
def tangled_lines(draw: st.DrawFn) -> list[Any]:
    """Ids from a small pool: duplicates, children before parents, loops and self-parents."""
    pool = ["a", "b", "c", "d", "call_1|fc_2"]
    lines: list[Any] = []
    for _ in range(draw(st.integers(0, 14))):
        if draw(st.integers(0, 8)) == 0:
            lines.append(draw(GARBAGE))
            continue
        eid = draw(st.sampled_from(pool))
        parent = draw(st.one_of(st.none(), st.sampled_from([*pool, "zz"]), st.integers()))
        lines.append({"type": "message", "id": eid, "parentId": parent, "message": draw(st.sampled_from(ROLE_MESSAGES))})
    return lines


@settings(SETTINGS, max_examples=300)
@given(tangled_lines())
def test_duplicates_out_of_order_parents_and_loops_keep_the_invariants(lines: list[Any]) -> None:
    check_invariants(ok(parse(session(*lines))))


# A fixed alphabet (separators, NUL, a lone surrogate, astral and escaped characters) keeps hypothesis from
# building its unicode tables, which is most of the cost of st.text() in a fresh home directory.
TEXT = st.lists(st.sampled_from(list("aZ0/.|:-_ \u2028\u2029\u0085\x00\ud800\U0001f600\"\\\n")),
                max_size=8).map("".join)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
# Two levels of nesting are enough to put every JSON type in every field (st.recursive is far slower).
JSON_VALUES = SCALARS | st.lists(SCALARS, max_size=2) | st.dictionaries(TEXT, SCALARS, max_size=2)
ENTRY_KEYS = ["type", "id", "parentId", "message", "role", "content", "text", "thinking", "redacted", "display",
              "summary", "toolCallId", "timestamp", "arguments", "firstKeptEntryId", "fromId"]


@st.composite
def entry_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """Objects shaped like entries with fields of any JSON type, nested message and content included."""
    obj: dict[str, Any] = draw(st.dictionaries(st.sampled_from(ENTRY_KEYS), JSON_VALUES, max_size=4))
    if draw(st.booleans()):
        obj["type"] = draw(st.sampled_from(["message", "custom_message", "compaction", "branch_summary", "label"]))
        obj["id"] = draw(st.sampled_from(["a", "b", "c"]))
        obj["parentId"] = draw(st.sampled_from([None, "a", "b", "c", "q"]))
    if draw(st.booleans()):
        content = draw(st.lists(st.dictionaries(st.sampled_from(ENTRY_KEYS), JSON_VALUES, max_size=3),
                                max_size=3))
        obj["message"] = {"role": draw(st.sampled_from(["user", "assistant", "toolResult", "bashExecution", 3])),
                          "content": content, "command": draw(JSON_VALUES), "output": draw(JSON_VALUES)}
        obj["content"] = content
    return obj


@settings(SETTINGS, max_examples=200)
@given(st.lists(entry_shaped(), max_size=6), st.dictionaries(st.sampled_from(["cwd", "version", "id",
                                                                               "parentSession"]), JSON_VALUES))
def test_fuzz_entry_shaped_json_never_raises(lines: list[Any], header_changes: dict[str, Any]) -> None:
    header = {**HEADER, **header_changes}
    blob = line(header) + b"".join(line(x) for x in lines)
    check_result(parse(blob))
    check_result(parse(blob, project="/scratch/proj", realpath=fake_realpath))


def fake_realpath(path: str) -> str:
    """Like os.path.realpath on a path that does not exist: ValueError on NUL, else the normalised path."""
    if "\x00" in path:
        raise ValueError("embedded null byte")
    return posixpath.normpath(path)


@settings(SETTINGS, max_examples=300)
@given(st.binary(max_size=600), st.booleans())
def test_fuzz_random_bytes_never_raise(blob: bytes, with_header: bool) -> None:
    result = parse(line(HEADER) + blob if with_header else blob)
    check_result(result)
    if with_header:
        assert isinstance(result, Parsed)


RECORDED = [(DATA / name).read_bytes() for name in
            ["session-main-final.jsonl", "nothink.jsonl", "empty.jsonl", "mid-eof.jsonl"]]


@st.composite
def mutated_recording(draw: st.DrawFn) -> bytes:
    """A recorded file after byte flips, line deletions, duplications, swaps and a truncation."""
    lines = draw(st.sampled_from(RECORDED)).split(b"\n")
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "delete", "duplicate", "swap", "splice"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "flip" and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            b = bytearray(lines[i])
            b[j] ^= 1 << draw(st.integers(0, 7))
            lines[i] = bytes(b)
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "splice":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    blob = b"\n".join(lines)
    return blob[: draw(st.integers(0, len(blob)))] if draw(st.booleans()) else blob


@settings(SETTINGS, max_examples=300)
@given(mutated_recording())
def test_fuzz_mutated_recordings_never_raise(blob: bytes) -> None:
    result = parse(blob, project="/scratch/proj", realpath=fake_realpath)
    check_result(result)
    if isinstance(result, FormatRefusal) and result.code == "incomplete-header":
        assert b"\n" not in blob
