"""F1 (roots only from specs, conversation ids), F2 (registrations as hints), F3 (unsupported harness and the
placeholder row), F4 (the catalogue and refused roots)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from helpers import LAYOUT, World, entry, header, listed_dirs, materialise, write_session

from mosaic.chat_pages import RepositorySpec, SeatRegistration, conversation_id, roots_from_specs

# samePath is private (roots_from_specs applies it to registrations): F2 tests the rule itself as well as
# through the registrations.
from mosaic.chat_pages.testing import same_path


def _reg(project: Path, seat: str = "alpha", harness: str = "pi", started: str = "2026-11-30T08:00:00.000Z",
         layout: str = LAYOUT, project_field: str | None = None, sessions: str | None = None) -> SeatRegistration:
    return SeatRegistration(
        seat=seat, harness=harness, layout_repo=layout,
        project=project_field if project_field is not None else project.name,
        sessions_dir=sessions if sessions is not None else str(project / ".pi/state" / seat / "sessions"),
        started_at=started,
    )


def test_F1_conversation_id_is_pi_plus_sha256_of_root_seat_and_name() -> None:
    cid = conversation_id("/a/proj", "alpha", "s.jsonl")
    assert cid == "pi-" + hashlib.sha256(b"/a/proj\0alpha\0s.jsonl").hexdigest()[:40]
    assert conversation_id("/a/proj", "alpha", "t.jsonl") != cid
    assert conversation_id("/a/proj", "beta", "s.jsonl") != cid
    assert conversation_id("/b/proj", "alpha", "s.jsonl") != cid


def test_F1_roots_come_only_from_specs_never_a_global_scan(world: World) -> None:
    approved = materialise(world.top, "proj-rpc", ["plain.jsonl", "abort.jsonl"])
    # Sessions that no spec names: another project, and another seat of the approved project.
    materialise(world.top, "proj-sm", ["forks.jsonl"])
    materialise(world.top, "proj-rpc", ["thinking.jsonl"], seat="beta")
    world.approve(approved)
    cat = world.catalogue()
    assert [(r["project"], r["seat"], r["file"]) for r in cat["conversations"]] == [
        ("proj-rpc", "alpha", "abort.jsonl"), ("proj-rpc", "alpha", "plain.jsonl")]
    # The never-approved files were not opened: the harness watched every call (inotify).
    beta = os.path.realpath(approved / ".pi/state/beta/sessions/thinking.jsonl")
    assert all(beta not in opened for opened in world.opened_log)
    # An id computed for an unapproved file does not resolve: no path comes from the caller.
    assert world.open(world.cid(approved, "thinking.jsonl", "beta"))["refusal"]["code"] == "unknown-conversation"
    assert world.open(world.cid(world.top / "proj-sm", "forks.jsonl"))["refusal"]["code"] == "unknown-conversation"
    for bad in ("../proj-sm/.pi/state/alpha/sessions/forks.jsonl", str(world.top), None, 7, "pi-zz"):
        assert world.open(bad)["refusal"] == {  # type: ignore[arg-type]
            "code": "unknown-conversation", "reconcile": True,
            "message": world.open(bad)["refusal"]["message"]}  # type: ignore[arg-type]


def test_F1_ids_resolve_by_listing_again_a_removed_file_is_unknown(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(root)
    cid = world.cid(root, "plain.jsonl")
    assert world.open(cid)["ok"]
    os.unlink(root / ".pi/state/alpha/sessions/plain.jsonl")
    assert world.open(cid)["refusal"]["code"] == "unknown-conversation"
    # A spec removed from the board: its conversations are no longer approved.
    materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.specs.clear()
    assert world.open(cid)["refusal"]["code"] == "unknown-conversation"


def test_F1_an_open_looks_first_where_a_listing_found_the_conversation(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open looks first where a listing found the same conversation before (one lstat in its root, the
    approved roots read again): a second open lists no sessions directory, so it costs the same beside 5
    session files or 5,000. A root no longer approved, or a file no longer there, is left to the listing,
    which decides as it always did: unknown-conversation."""
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    for i in range(40):
        write_session(root, f"z{i:03d}.jsonl", [header(root)])
    world.approve(root)
    cid = world.cid(root, "plain.jsonl")
    listed = listed_dirs(monkeypatch)
    assert world.open(cid)["ok"] and listed
    listed.clear()
    assert world.open(cid)["ok"] and listed == []
    approved = list(world.specs)
    world.specs.clear()
    assert world.open(cid)["refusal"]["code"] == "unknown-conversation"
    world.specs += approved
    os.unlink(root / ".pi/state/alpha/sessions/plain.jsonl")
    listed.clear()
    assert world.open(cid)["refusal"]["code"] == "unknown-conversation" and listed


def test_F1_specs_with_a_relative_root_or_a_bad_seat_are_refused_roots(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.specs += [RepositorySpec("relative/proj", "alpha", LAYOUT), RepositorySpec(str(root), "../x", LAYOUT),
                    RepositorySpec(str(root), "a/b", LAYOUT)]
    cat = world.catalogue()
    assert cat["conversations"] == []
    assert [r["refusal"]["code"] for r in cat["refusedRoots"]] == ["unsafe-path"] * 3


def test_F1_symlinked_project_root_is_allowed_and_ids_use_the_root_as_written(world: World) -> None:
    real = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    link = world.top / "compat"
    link.symlink_to(real)
    world.approve(link)
    cat = world.catalogue()
    assert [r["id"] for r in cat["conversations"]] == [conversation_id(str(link), "alpha", "plain.jsonl")]
    assert cat["conversations"][0]["refusal"] is None
    assert world.open(cat["conversations"][0]["id"])["ok"]


def test_F2_registration_counts_only_when_seat_layout_project_and_sessions_dir_all_match(world: World) -> None:
    root = world.top / "proj"
    write_session(root, "s.jsonl", [header(root, timestamp="2026-11-30T09:00:00.000Z"), entry("u1", None, "hi")])
    world.approve(root)
    good = _reg(root, started="2026-11-30T08:00:00.000Z")
    wrong = [
        _reg(root, seat="beta", started="2026-11-30T08:30:00.000Z"),
        _reg(root, layout="/other/layout", started="2026-11-30T08:30:00.000Z"),
        _reg(root, project_field="other-project", started="2026-11-30T08:30:00.000Z"),
        _reg(root, sessions=str(root / ".pi/state/alpha/other"), started="2026-11-30T08:30:00.000Z"),
        # A non-Pi harness with a mismatching field is ignored too (it does not make the root unsupported).
        _reg(root, harness="claude-code", layout="/other/layout"),
    ]
    world.registrations += [good, *wrong]
    row = world.catalogue()["conversations"][0]
    assert row["kind"] == "conversation" and row["engineStartedAt"] == "2026-11-30T08:00:00.000Z"
    # project may also be the project root path, compared with samePath (here through a symlink).
    link = world.top / "link"
    link.symlink_to(root)
    world.registrations[:] = [_reg(root, project_field=str(link), started="2026-11-30T08:45:00.000Z",
                                   sessions=str(link / ".pi/state/alpha/sessions"))]
    assert world.catalogue()["conversations"][0]["engineStartedAt"] == "2026-11-30T08:45:00.000Z"


def test_F2_engine_started_at_only_for_conversations_created_at_or_after_it(world: World) -> None:
    root = world.top / "proj"
    write_session(root, "early.jsonl", [header(root, timestamp="2026-11-30T07:00:00.000Z")])
    write_session(root, "same.jsonl", [header(root, timestamp="2026-11-30T08:00:00.000Z")])
    write_session(root, "late.jsonl", [header(root, timestamp="2026-11-30T10:00:00.000Z")])
    world.approve(root)
    world.registrations += [_reg(root, started="2026-11-30T08:00:00.000Z"),
                            _reg(root, started="2026-11-30T09:00:00+00:00")]
    rows = {r["file"]: r["engineStartedAt"] for r in world.catalogue()["conversations"]}
    assert rows == {"early.jsonl": None, "same.jsonl": "2026-11-30T08:00:00.000Z",
                    "late.jsonl": "2026-11-30T09:00:00+00:00"}


def test_F3_non_pi_harness_is_one_unsupported_row_and_its_directory_is_never_read(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"], seat="rocko")
    world.approve(root, seat="rocko")
    world.registrations.append(_reg(root, seat="rocko", harness="claude-code"))
    cat = world.catalogue()
    assert cat["conversations"] == [{
        "kind": "unsupported", "id": conversation_id(str(root), "rocko", ""), "project": "proj-rpc",
        "seat": "rocko", "harness": "claude-code", "unsupportedReason": "unsupported-harness", "placeholder": False}]
    sessions = os.path.realpath(root / ".pi/state/rocko/sessions")
    assert not any(p.startswith(sessions) for opened in world.opened_log for p in opened)
    res = world.open(cat["conversations"][0]["id"])
    assert res["refusal"]["code"] == "unsupported-harness" and res["refusal"]["reconcile"] is False
    # The file's own id is not reachable either: the directory is never listed.
    assert world.open(world.cid(root, "plain.jsonl", "rocko"))["refusal"]["code"] == "unknown-conversation"


def test_F3_placeholder_row_for_a_seat_without_sessions_under_an_approved_root(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(root)
    world.registrations += [
        _reg(root, seat="rocko", harness="claude-code"),  # Rocko's case: the standard dir, no spec
        _reg(world.top / "elsewhere", seat="zed", harness="claude-code"),  # not under an approved root
        _reg(root, seat="pi-seat", harness="pi"),  # a Pi registration never adds a root
    ]
    rows = world.catalogue()["conversations"]
    assert [(r["kind"], r["seat"]) for r in rows] == [("conversation", "alpha"), ("unsupported", "rocko")]
    assert rows[1]["placeholder"] is True and rows[1]["unsupportedReason"] == "unsupported-harness"


def test_F4_catalogue_rows_refusals_and_refused_roots(world: World) -> None:
    root = materialise(world.top, "proj-adv", ["crlf.jsonl", "cwd-outside.jsonl", "truncated-header.jsonl"])
    (root / ".pi/state/alpha/sessions/.hidden.jsonl").write_bytes(b"x")
    (root / ".pi/state/alpha/sessions/notes.txt").write_bytes(b"x")
    world.approve(root)
    gone = world.top / "gone"
    world.approve(gone)
    noseat = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(noseat, seat="nobody")
    cat = world.catalogue()
    assert cat["ok"] is True and cat["generatedAt"] == "2027-01-15T08:00:00.000Z"
    rows = {r["file"]: r for r in cat["conversations"]}
    assert set(rows) == {"crlf.jsonl", "cwd-outside.jsonl", "truncated-header.jsonl"}
    assert rows["crlf.jsonl"]["refusal"] is None and rows["crlf.jsonl"]["sessionId"]
    assert rows["cwd-outside.jsonl"]["refusal"]["code"] == "foreign-project"
    assert rows["truncated-header.jsonl"]["refusal"]["code"] == "incomplete-header"
    assert [(r["project"], r["seat"], r["refusal"]["code"]) for r in cat["refusedRoots"]] == [
        ("gone", "alpha", "unavailable"), ("proj-rpc", "nobody", "unavailable")]
    shutil.rmtree(root)
    assert world.catalogue()["refusedRoots"][0]["refusal"]["code"] == "unavailable"


def test_F2_same_path_compares_real_paths_and_missing_paths_as_written(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "a")
    assert same_path(str(tmp_path / "l"), str(tmp_path / "a"))
    assert same_path(str(tmp_path / "missing/x"), str(tmp_path / "missing/x/"))
    assert not same_path("relative", "relative")
    assert not same_path(str(tmp_path / "a"), str(tmp_path / "b"))
    roots = roots_from_specs([RepositorySpec(str(tmp_path / "a"), "s", LAYOUT)] * 2)
    assert len(roots.sessions) == 1


def test_F4_the_catalogue_and_open_agree_on_a_header_line_over_1_MiB(world: World) -> None:
    """A complete header line longer than 1 MiB (an extra field Pi would ignore) is a header to both: the
    catalogue reads the whole of line 1, as open does; and a header cut short by the end of the file is
    incomplete to both."""
    project = world.top / "proj-long"
    long_header = header(project, padding="p" * (3 << 19))  # 1.5 MiB
    assert len(long_header) > 1 << 20
    write_session(project, "long.jsonl", [long_header, entry("a1", None, "hello")])
    write_session(project, "cut.jsonl", [long_header[: (1 << 20) + 10]])  # no LF: still being written
    world.approve(project)
    rows = {r["file"]: r for r in world.catalogue()["conversations"]}
    assert rows["long.jsonl"]["refusal"] is None and rows["long.jsonl"]["sessionId"] == "01a22bb8-0000-7000-8000-000000000001"
    assert rows["cut.jsonl"]["refusal"]["code"] == "incomplete-header"
    opened = world.open(rows["long.jsonl"]["id"])
    assert opened["ok"] is True, opened
    cut = world.open(rows["cut.jsonl"]["id"])
    assert cut["ok"] is False and cut["refusal"]["code"] == "incomplete-header"
