"""The live-session guard (brief §2 "Location and live-session guard"; fixtures G1-G3; mutant 14).

Every location here, the "live" ones included, is a directory this test makes inside its own tmp_path and
passes to the guard; nothing reads $HOME or touches a real ~/.pi, ~/.claude, ~/.mosaic-dev or .pi/state.
Live files hold a marker string, so a test can check that no refusal message carries file content.

Two placements of the live locations: "outside" (siblings of the fixture root, as in production) and
"inside" (under the fixture root, so containment alone would accept them and each live rule has to do
the refusing itself).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mosaic.controller import ControlRefusal
from mosaic.controller.lifecycle import RULES, LiveRoots, LiveSessionGuard

LIVE_MARKER = "LIVE-CONTENT-0f3a9c"
SESSION_REL = Path("proj/.pi/state/seat/sessions/s.jsonl")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@dataclasses.dataclass
class World:
    """A fixture root with one session, and live locations (each holding a live session file)."""

    tmp: Path
    fixture: Path
    session: Path
    claims: Path  # not created: a claim root that does not exist yet resolves through its ancestor
    home: Path
    repo: Path
    data: Path
    registered_dir: Path
    registered_file: Path

    def roots(self, **changes: object) -> LiveRoots:
        fields: dict[str, object] = dict(
            fixture_root=self.fixture, home=self.home, repository=self.repo, data_root=self.data,
            registrations=(self.registered_dir, self.registered_file))
        fields.update(changes)
        return LiveRoots(**fields)  # type: ignore[arg-type]

    def guard(self, **changes: object) -> LiveSessionGuard:
        return LiveSessionGuard(self.roots(**changes))

    def live_file(self, kind: str) -> Path:
        """A live session file in the live location `kind`."""
        return {
            "repository": self.repo / ".pi/state/seat/sessions/live.jsonl",
            "home-pi": self.home / ".pi/agent/sessions/--proj--/live.jsonl",
            "home-claude": self.home / ".claude/projects/-proj/live.jsonl",
            "home-mosaic-dev": self.home / ".mosaic-dev/state/live.jsonl",
            "data-root": self.data / "sessions/live.jsonl",
            "registration-dir": self.registered_dir / "live.jsonl",
            "registration-file": self.registered_file,
        }[kind]


def make_world(tmp: Path, placement: str = "outside") -> World:
    fixture = tmp / "fixture"
    session = _write(fixture / SESSION_REL, '{"type":"session"}\n')
    live_base = fixture / "live" if placement == "inside" else tmp
    world = World(
        tmp=tmp, fixture=fixture, session=session, claims=fixture / "claims",
        home=live_base / "home", repo=live_base / "repo", data=live_base / "data" / "root",
        registered_dir=live_base / "seats/seat-a/sessions",
        registered_file=live_base / "seats/seat-b/sessions/live.jsonl")
    for kind in LIVE_KINDS:
        _write(world.live_file(kind), f'{{"type":"session","secret":"{LIVE_MARKER}"}}\n')
    return world


# kind -> the label the refusal message names
LIVE_KINDS: dict[str, str] = {
    "repository": "the repository's .pi/state",
    "home-pi": "home .pi",
    "home-claude": "home .claude",
    "home-mosaic-dev": "home .mosaic-dev",
    "data-root": "the data root",
    "registration-dir": "a seat registration",
    "registration-file": "a seat registration",
}


def refused(call: Callable[[], object], rule: str, code: str = "live-session-refused") -> str:
    """Run `call`; it must raise ControlRefusal `code` naming `rule` first. Returns the message."""
    assert rule in RULES or code != "live-session-refused"
    with pytest.raises(ControlRefusal) as info:
        call()
    assert info.value.code == code, info.value
    assert info.value.reconcile is False
    if code == "live-session-refused":
        assert info.value.message.startswith(f"{rule}: "), info.value.message
    assert LIVE_MARKER not in info.value.message
    return info.value.message


# --- the good case ------------------------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["outside", "inside"])
def test_a_fixture_session_and_claim_root_pass_check_and_bind_and_return_their_real_paths(
        tmp_path: Path, placement: str) -> None:
    world = make_world(tmp_path, placement)
    guard = world.guard()
    session = guard.check(world.session, what="session file")
    claims = guard.check(world.claims, what="claim root")
    assert session == os.path.realpath(world.session) == str(world.fixture / SESSION_REL)
    assert claims == str(world.fixture / "claims")
    assert guard.bind(world.session, what="session file", expected=session) == session
    assert guard.bind(str(world.claims), what="claim root", expected=claims) == claims


def test_a_fixture_root_given_through_a_symlink_is_resolved_and_paths_come_back_real(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    link = tmp_path / "fixture-link"
    link.symlink_to(world.fixture)
    guard = world.guard(fixture_root=link)
    assert guard.fixture_root == str(world.fixture)
    assert guard.check(link / SESSION_REL, what="session file") == str(world.session)
    assert guard.check(link / "claims/not/yet", what="claim root") == str(world.fixture / "claims/not/yet")


# --- G1: live locations refused at construction --------------------------------------------------------


@pytest.mark.parametrize("placement", ["outside", "inside"])
@pytest.mark.parametrize("kind", sorted(LIVE_KINDS))
def test_G1_a_session_file_in_a_live_location_is_refused(tmp_path: Path, kind: str, placement: str) -> None:
    world = make_world(tmp_path, placement)
    guard = world.guard()
    live = world.live_file(kind)
    message = refused(lambda: guard.check(live, what="session file"), "live-location")
    assert LIVE_KINDS[kind] in message and "session file" in message and str(live) in message


@pytest.mark.parametrize("placement", ["outside", "inside"])
@pytest.mark.parametrize("kind", sorted(set(LIVE_KINDS) - {"registration-file"}))
def test_G1_a_claim_root_in_a_live_location_is_refused(tmp_path: Path, kind: str, placement: str) -> None:
    world = make_world(tmp_path, placement)
    guard = world.guard()
    claim_root = world.live_file(kind).parent / "claims"  # does not exist yet
    message = refused(lambda: guard.check(claim_root, what="claim root"), "live-location")
    assert LIVE_KINDS[kind] in message and "claim root" in message


@pytest.mark.parametrize(("container", "label"), [
    ("repo", "the repository's .pi/state"),
    ("home", "home .pi"),
    ("data", "the data root"),
    ("seats", "a seat registration"),
])
def test_G1_a_claim_root_that_contains_a_live_location_is_refused(
        tmp_path: Path, container: str, label: str) -> None:
    # Inside placement: the container is strictly inside the fixture root, so only this rule refuses it.
    world = make_world(tmp_path, "inside")
    guard = world.guard()
    message = refused(lambda: guard.check(world.fixture / "live" / container, what="claim root"),
                      "contains-live-location")
    assert label in message


@pytest.mark.parametrize("where", ["a sibling directory", "a sibling sharing the root's name as a prefix",
                                   "the fixture root itself"])
def test_G1_a_path_not_strictly_inside_the_fixture_root_is_refused(tmp_path: Path, where: str) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    path = {
        "a sibling directory": _write(tmp_path / "elsewhere/s.jsonl", "{}\n"),
        "a sibling sharing the root's name as a prefix": _write(tmp_path / "fixture2/s.jsonl", "{}\n"),
        "the fixture root itself": world.fixture,
    }[where]
    message = refused(lambda: guard.check(path, what="claim root"), "outside-fixture-root")
    assert str(world.fixture) in message


def test_G1_a_session_under_another_projects_pi_state_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    other = _write(tmp_path / "other-project/.pi/state/seat/sessions/x.jsonl", "{}\n")
    message = refused(lambda: world.guard().check(other, what="session file"),
                      "pi-state-outside-fixture-root")
    assert str(tmp_path / "other-project/.pi/state") in message


def test_G1_a_hard_link_to_a_registered_live_session_is_refused_by_identity(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    linked = world.session.parent / "hard.jsonl"
    os.link(world.registered_file, linked)
    message = refused(lambda: guard.check(linked, what="session file"), "live-identity")
    assert "a seat registration" in message and str(world.registered_file) in message


@pytest.mark.parametrize("where", ["under home .pi", "a registered directory", "under a .pi/state"])
def test_G1_a_fixture_root_in_a_live_location_is_refused_at_construction(tmp_path: Path, where: str) -> None:
    world = make_world(tmp_path)
    fixture, rule = {
        "under home .pi": (world.home / ".pi/fixtures", "live-location"),
        "a registered directory": (world.registered_dir, "live-location"),
        "under a .pi/state": (tmp_path / "p/.pi/state/fixtures", "pi-state-outside-fixture-root"),
    }[where]
    fixture.mkdir(parents=True, exist_ok=True)
    refused(lambda: world.guard(fixture_root=fixture), rule)


def test_construction_refuses_configuration_for_a_missing_relative_or_unresolvable_root(
        tmp_path: Path) -> None:
    world = make_world(tmp_path)
    for changes in ({"fixture_root": None}, {"home": None}, {"fixture_root": "fixture"},
                    {"home": "home"}, {"repository": ""}, {"registrations": ("seats/x",)}):
        message = refused(lambda c=changes: world.roots(**c), "", code="configuration")  # type: ignore[misc]
        assert "missing" in message or "not an absolute path" in message, changes
    file_root = _write(tmp_path / "a-file", "{}\n")
    for fixture in (tmp_path / "absent", file_root):
        refused(lambda f=fixture: world.guard(fixture_root=f), "", code="configuration")  # type: ignore[misc]
    (tmp_path / "loop-home").mkdir()
    (tmp_path / "loop-home/.pi").symlink_to(tmp_path / "loop-home/.pi")
    message = refused(lambda: world.guard(home=tmp_path / "loop-home"), "", code="configuration")
    assert "home .pi" in message


def test_live_roots_is_a_frozen_value_with_no_default_path(tmp_path: Path) -> None:
    registrations = [tmp_path / "r"]  # a list: kept as a tuple of str
    roots = LiveRoots(fixture_root=tmp_path / "f", home=tmp_path / "h",
                      registrations=registrations)  # type: ignore[arg-type]
    assert (roots.fixture_root, roots.home, roots.repository, roots.data_root, roots.registrations) == (
        str(tmp_path / "f"), str(tmp_path / "h"), None, None, (str(tmp_path / "r"),))
    assert roots == LiveRoots(fixture_root=str(tmp_path / "f"), home=str(tmp_path / "h"),
                              registrations=(str(tmp_path / "r"),))
    assert [kind for kind, _ in roots.live_locations()] == [
        "home .pi", "home .claude", "home .mosaic-dev", "a seat registration"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        roots.home = "/"  # type: ignore[misc]
    with pytest.raises(TypeError):
        LiveRoots(fixture_root=tmp_path / "f")  # type: ignore[call-arg]


# --- G2: a symlink inside the fixture root pointing at a live session ----------------------------------


@pytest.mark.parametrize("at", ["construction", "bind"])
def test_G2_a_fixture_symlink_to_a_live_session_file_is_refused_by_the_real_path_check(
        tmp_path: Path, at: str) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    live = world.live_file("home-pi")
    link = world.session.parent / "linked.jsonl"
    link.symlink_to(live)
    if at == "construction":
        message = refused(lambda: guard.check(link, what="session file"), "live-location")
    else:  # the real-path check runs at bind too, before any comparison with the expected path
        message = refused(lambda: guard.bind(link, what="session file", expected=str(link)), "live-location")
    assert "home .pi" in message and str(live) in message


def test_G2_a_symlinked_directory_component_into_a_live_directory_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    (world.fixture / "proj/.pi/state/seat2").symlink_to(os.path.relpath(
        world.home / ".pi/agent", world.fixture / "proj/.pi/state"))  # a relative link
    path = world.fixture / "proj/.pi/state/seat2/sessions/--proj--/live.jsonl"
    assert path.read_text(encoding="utf-8").count(LIVE_MARKER) == 1  # the link really reaches it
    message = refused(lambda: guard.check(path, what="session file"), "live-location")
    assert "home .pi" in message


def test_G2_a_fixture_symlink_out_of_the_fixture_root_is_refused_by_containment(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    outside = _write(tmp_path / "elsewhere/s.jsonl", "{}\n")
    link = world.session.parent / "out.jsonl"
    link.symlink_to(outside)
    refused(lambda: world.guard().check(link, what="session file"), "outside-fixture-root")


# --- G3: a fixture path swapped after construction ----------------------------------------------------


def _swap_for_symlink(path: Path, target: Path) -> None:
    path.rename(path.with_name(path.name + ".orig"))
    path.symlink_to(target)


@pytest.mark.parametrize("swap", ["the file", "a directory component", "the fixture root", "the claim root"])
def test_G3_a_fixture_path_swapped_for_a_live_one_after_construction_is_refused_at_bind(
        tmp_path: Path, swap: str) -> None:
    world = make_world(tmp_path)
    world.claims.mkdir()
    guard = world.guard()
    session = guard.check(world.session, what="session file")
    claims = guard.check(world.claims, what="claim root")
    live_home = world.home / ".pi"
    if swap == "the file":
        _swap_for_symlink(world.session, world.live_file("home-pi"))
    elif swap == "a directory component":
        mirror = _write(live_home / "mirror/sessions/s.jsonl", LIVE_MARKER).parent
        _swap_for_symlink(world.session.parent, mirror)
    elif swap == "the fixture root":
        mirror = _write(live_home / "mirror" / SESSION_REL, LIVE_MARKER).parents[len(SESSION_REL.parts) - 1]
        (mirror / "claims").mkdir()
        _swap_for_symlink(world.fixture, mirror)
    else:
        (world.home / ".mosaic-dev/claims").mkdir()
        _swap_for_symlink(world.claims, world.home / ".mosaic-dev/claims")
    path, what, expected = ((world.claims, "claim root", claims) if swap == "the claim root"
                            else (world.session, "session file", session))
    message = refused(lambda: guard.bind(path, what=what, expected=expected), "live-location")
    assert ("home .mosaic-dev" if swap == "the claim root" else "home .pi") in message


def test_G3_a_fixture_file_swapped_for_another_fixture_file_is_refused_at_bind(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    session = guard.check(world.session, what="session file")
    other = _write(world.session.parent / "other.jsonl", '{"type":"session"}\n')
    _swap_for_symlink(world.session, other)
    assert guard.check(world.session, what="session file") == str(other)  # harmless on its own
    message = refused(lambda: guard.bind(world.session, what="session file", expected=session),
                      "changed-since-construction")
    assert str(other) in message and session in message


# --- `..`, relative paths, unresolvable paths ----------------------------------------------------------


def test_dotdot_that_climbs_out_of_the_fixture_root_lexically_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    path = f"{world.fixture}/proj/../../home/.pi/agent/sessions/--proj--/live.jsonl"
    assert "home .pi" in refused(lambda: world.guard().check(path, what="session file"), "live-location")


def test_dotdot_after_a_symlink_is_the_parent_of_the_target_not_of_the_link(tmp_path: Path) -> None:
    # Lexically this path is fixture/proj/.pi/state/seat/sessions/settings.json, inside the fixture root;
    # the kernel resolves the `..` from the link's target: home/.pi/agent/settings.json.
    world = make_world(tmp_path)
    _write(world.home / ".pi/agent/settings.json", LIVE_MARKER)
    (world.session.parent / "agentlink").symlink_to(world.home / ".pi/agent/sessions")
    path = world.session.parent / "agentlink/../settings.json"
    assert path.read_text(encoding="utf-8") == LIVE_MARKER
    message = refused(lambda: world.guard().check(path, what="session file"), "live-location")
    assert str(world.home / ".pi/agent/settings.json") in message


@pytest.mark.parametrize("spelling", ["{fixture}/proj/../proj/.pi/state/./seat/sessions//s.jsonl",
                                      "/../../{fixture}/proj/.pi/state/seat/sessions/s.jsonl"])
def test_dotdot_that_stays_inside_resolves_to_the_canonical_real_path(tmp_path: Path, spelling: str) -> None:
    world = make_world(tmp_path)
    path = spelling.format(fixture=world.fixture)
    assert world.guard().check(path, what="session file") == str(world.session)


def test_dotdot_after_a_component_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    path = f"{world.fixture}/not-yet/../claims"
    message = refused(lambda: world.guard().check(path, what="claim root"), "unresolvable")
    assert "not-yet" in message


@pytest.mark.parametrize("relative", ["proj/.pi/state/seat/sessions/s.jsonl", "./claims", ""])
def test_a_relative_path_is_refused_even_where_the_working_directory_would_put_it_inside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str) -> None:
    world = make_world(tmp_path)
    guard = world.guard()
    monkeypatch.chdir(world.fixture)
    refused(lambda: guard.check(relative, what="session file"), "relative-path")


@pytest.mark.parametrize("case", ["a symlink loop", "a self link", "a NUL byte"])
def test_an_unresolvable_path_is_refused(tmp_path: Path, case: str) -> None:
    world = make_world(tmp_path)
    sessions = world.session.parent
    if case == "a symlink loop":
        (sessions / "a").symlink_to(sessions / "b")
        (sessions / "b").symlink_to("a")
        path = str(sessions / "a/x.jsonl")
    elif case == "a self link":
        (sessions / "self").symlink_to("self")
        path = str(sessions / "self")
    else:
        path = f"{sessions}/s\0.jsonl"
    refused(lambda: world.guard().check(path, what="session file"), "unresolvable")
