"""F13: cursors in memory, LRU 1000, TTL 10 minutes, bound to actor, purpose, conversation, branch, snapshot,
epoch and expiry; cursor-unknown, cursor-expired, cursor-foreign; a foreign attempt does not consume the
cursor; actor and purpose are refused unless local-operator and history. The TTL uses the injected clock."""

from __future__ import annotations

from helpers import World, entry, header, write_session

from mosaic.chat_pages.reader import CURSOR_CAP, CURSOR_TTL_SECONDS


def _setup(world: World, name: str = "s.jsonl", n: int = 250) -> str:
    root = world.top / "proj"
    lines = [header(root)]
    parent = None
    for i in range(n):
        lines.append(entry(f"e{i:04d}", parent, f"text {i}"))
        parent = f"e{i:04d}"
    write_session(root, name, lines)
    if not world.specs:
        world.approve(root)
    return world.cid(root, name)


def test_F13_cursor_record_binds_actor_purpose_conversation_branch_snapshot_epoch_expiry(world: World) -> None:
    cid = _setup(world)
    res = world.open(cid)
    c = res["cursor"]
    assert c["kind"] == "page" and res["follow"] is None
    assert (c["actor"], c["purpose"], c["conversation"], c["branch"]) == ("local-operator", "history", cid, "main")
    assert c["snapshotDigest"] == res["page"]["snapshotDigest"] and c["sourceEpoch"] == res["page"]["sourceEpoch"]
    assert c["expiresAt"] == "2027-01-15T08:10:00.000Z"  # the injected clock + 10 minutes
    assert CURSOR_TTL_SECONDS == 600 and CURSOR_CAP == 1000


def test_F13_cursors_are_single_use_and_unknown_ones_are_refused(world: World) -> None:
    cid = _setup(world)
    res = world.open(cid)
    cur = res["cursor"]["id"]
    assert world.next(cur, cid, "main")["ok"]
    again = world.next(cur, cid, "main")
    assert again["refusal"] == {"code": "cursor-unknown", "reconcile": True, "message": again["refusal"]["message"]}
    for bogus in ("c-" + "0" * 32, "nope", None, 7):
        assert world.next(bogus, cid, "main")["refusal"]["code"] == "cursor-unknown"  # type: ignore[arg-type]


def test_F13_cursor_expires_after_10_minutes_on_the_injected_clock(world: World) -> None:
    cid = _setup(world)
    res = world.open(cid)
    world.clock.advance(CURSOR_TTL_SECONDS - 0.001)
    ok = world.next(res["cursor"]["id"], cid, "main")
    assert ok["ok"]
    world.clock.advance(CURSOR_TTL_SECONDS)
    out = world.next(ok["cursor"]["id"], cid, "main")
    assert out["refusal"] == {"code": "cursor-expired", "reconcile": True, "message": out["refusal"]["message"]}
    assert world.next(ok["cursor"]["id"], cid, "main")["refusal"]["code"] == "cursor-unknown"


def test_F13_follow_cursors_expire_too(world: World) -> None:
    cid = _setup(world, n=3)
    res = world.open(cid)
    world.clock.advance(CURSOR_TTL_SECONDS)
    assert world.follow(res)["refusal"]["code"] == "cursor-expired"


def test_F13_foreign_attempt_is_refused_and_does_not_consume_the_cursor(world: World) -> None:
    cid = _setup(world)
    other = _setup(world, "t.jsonl")
    res = world.open(cid)
    cur = res["cursor"]["id"]
    for conv, branch in ((other, "main"), (cid, "b.other"), (cid, None)):
        out = world.next(cur, conv, branch)
        assert out["refusal"] == {"code": "cursor-foreign", "reconcile": True, "message": out["refusal"]["message"]}
    # The old view keeps working: the cursor was not consumed.
    assert world.next(cur, cid, "main")["ok"]


def test_F13_actor_and_purpose_are_refused_unless_local_operator_and_history(world: World) -> None:
    cid = _setup(world)
    res = world.open(cid)
    cur = res["cursor"]["id"]
    for kw, code in (({"actor": "someone"}, "unknown-actor"), ({"purpose": "export"}, "unsupported-purpose"),
                     ({"actor": None}, "unknown-actor")):
        assert world.open(cid, **kw)["refusal"] == {"code": code, "reconcile": False,
                                                    "message": world.open(cid, **kw)["refusal"]["message"]}
        assert world.next(cur, cid, "main", **kw)["refusal"]["code"] == code
    assert world.open(cid, actor="local-operator", purpose="history")["ok"]
    assert world.next(cur, cid, "main")["ok"]  # refused callers did not consume it either


def test_F13_lru_cap_of_1000_evicts_the_oldest_cursor(world: World) -> None:
    # A one-item session: each open issues one follow cursor (follows count against the cap like page
    # cursors). Every call below is watched and validated.
    cid = _setup(world, n=1)

    def issue() -> str:
        res = world.open(cid)
        assert res["cursor"] is None
        return str(res["follow"]["id"])

    first = issue()
    for _ in range(CURSOR_CAP - 1):
        issue()
    assert world.reader.cursor_count() == CURSOR_CAP
    assert world.next(first, cid, "main")["ok"]  # still held: exactly 1000 cursors
    second = issue()
    issue()
    issue()  # over the cap: the least recently issued go first
    assert world.reader.cursor_count() == CURSOR_CAP
    assert world.next(second, cid, "main")["ok"]
    oldest = issue()
    for _ in range(CURSOR_CAP):
        issue()
    out = world.next(oldest, cid, "main")
    assert out["refusal"]["code"] == "cursor-unknown"  # evicted
