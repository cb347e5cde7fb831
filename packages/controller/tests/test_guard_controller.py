"""The live-session guard through `LaunchingController` (brief §2 "Location and live-session guard"; G1-G3): at
construction (G1, and G2's symlinked live path), at bind when `start()` begins, and again right before the
spawn (G3: a fixture path swapped for a live one after construction). Each call site has a mutant that
removes it (mutants/controller--guard-*.patch); the tests below kill them, each by what a refused
controller must leave: nothing claimed in the fixture's claim root, nothing written to a live location,
nothing launched. The recover call site is tested on the real kernel (tests_cohort/test_recover.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import FixtureVerifier
from mosaic.controller import Hooks, LaunchingController, PiSpec, Placement
from mosaic.controller.testing import SESSION_HEADER, FixtureTree
from mosaic.safe_open import Refusal

FAKE = ("/usr/bin/python3", "-m", "mosaic.pi_rpc.testing.fake_engine")


class NeverLaunch:
    """A launcher a refused controller must never use for a launch."""

    def __init__(self) -> None:
        self.closed = False

    def prewarm(self) -> None:
        pass

    def launch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused controller launched an engine")

    def rediscover(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused controller looked for a cohort")

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def tree(tmp_path: Path) -> FixtureTree:
    t = FixtureTree(tmp_path / "fx")
    t.make((os.getuid(), os.getgid()))
    return t


def live_session(tree: FixtureTree) -> Path:
    """A session file in a live location: the operator home's `.pi` (LiveRoots.home)."""
    live = tree.root / "operator-home" / ".pi" / "state" / "seat" / "sessions" / "live.jsonl"
    live.parent.mkdir(parents=True)
    live.write_text(SESSION_HEADER.format(id="01a22a58-944f-7072-a9ab-f808835fc6a2", cwd=tree.project))
    return live


def live_dir(tree: FixtureTree) -> Path:
    d = tree.root / "operator-home" / ".claude" / "claims"
    d.mkdir(parents=True)
    return d


def controller(tree: FixtureTree, tmp_path: Path, launcher: NeverLaunch | None = None,
               hooks: Hooks | None = None, **placement: Any) -> LaunchingController:
    sock = tmp_path / "sock"
    sock.mkdir(mode=0o700, exist_ok=True)
    return LaunchingController(Placement(**{**tree.placement(str(sock)), **placement}),
                               PiSpec(env=tree.engine_env(), command=FAKE), launcher or NeverLaunch(),  # type: ignore[arg-type]
                               verifier=FixtureVerifier(), hooks=hooks)


def refused_live(call: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    assert caught.value.code == "live-session-refused", caught.value.to_dict()
    return caught.value


def tree_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ------------------------------------------------------------------------------------------ construction

def test_G1_through_LaunchingController_a_registered_session_file_is_refused_at_construction(
        tree: FixtureTree, tmp_path: Path) -> None:
    refused_live(lambda: controller(tree, tmp_path, registrations=(str(tree.session.parent),)))
    assert os.listdir(tree.claims) == []


def test_G1_through_LaunchingController_a_registered_claim_root_is_refused_at_construction(
        tree: FixtureTree, tmp_path: Path) -> None:
    refusal = refused_live(lambda: controller(tree, tmp_path, registrations=(str(tree.claims),)))
    assert "claim root" in refusal.message
    assert os.listdir(tree.claims) == []


def test_G2_through_LaunchingController_a_fixture_symlink_to_a_live_session_is_refused_at_construction(
        tree: FixtureTree, tmp_path: Path) -> None:
    live = live_session(tree)
    tree.session.unlink()
    tree.session.symlink_to(live)
    refused_live(lambda: controller(tree, tmp_path))
    assert os.listdir(tree.claims) == []


# ------------------------------------------------------------------------------------- bind at start()

@pytest.mark.parametrize("what", ["session", "claim-root"])
def test_G3_through_LaunchingController_a_path_swapped_after_construction_is_refused_at_start_before_any_claim(
        tree: FixtureTree, tmp_path: Path, what: str) -> None:
    launcher = NeverLaunch()
    c = controller(tree, tmp_path, launcher)
    if what == "session":
        live = live_session(tree)
        before = live.read_bytes()
        tree.session.unlink()
        tree.session.symlink_to(live)
        target = live.parent
    else:
        target = live_dir(tree)
        os.rename(tree.claims, tree.root / "claims-moved")
        tree.claims.symlink_to(target)
    refused_live(lambda: asyncio.run(c.start()))
    claims = tree.claims if what == "session" else tree.root / "claims-moved"
    assert os.listdir(claims) == []  # nothing claimed: the bind came before the claim root was opened
    if what == "session":
        assert live.read_bytes() == before and tree_files(target) == ["live.jsonl"]
    else:
        assert tree_files(target) == []  # no claim written into the live directory
    assert launcher.closed  # the prewarmed helper was let go


@pytest.mark.parametrize("what", ["session", "claim-root"])
def test_G3_through_LaunchingController_a_path_swapped_after_the_reservation_is_refused_before_the_spawn(
        tree: FixtureTree, tmp_path: Path, what: str) -> None:
    live = live_session(tree) if what == "session" else None
    target = live_dir(tree) if what == "claim-root" else None

    def swap(step: str) -> None:
        if step != "reserved":
            return
        if live is not None:
            tree.session.unlink()
            tree.session.symlink_to(live)
        else:
            assert target is not None
            os.rename(tree.claims, tree.root / "claims-moved")
            tree.claims.symlink_to(target)

    launcher = NeverLaunch()
    c = controller(tree, tmp_path, launcher, hooks=Hooks(on_launch_step=swap))
    refused_live(lambda: asyncio.run(c.start()))  # NeverLaunch fails the test if the spawn went on
    claims = tree.claims if what == "session" else tree.root / "claims-moved"
    from mosaic.writer_claim import ClaimStore, State

    store = ClaimStore(str(claims))
    heads = [store.observe(c.seat_key, c.session_key).seat.revision,
             store.observe(c.seat_key, c.session_key).session.revision]
    for head in heads:  # reserved, never marked: a restart frees it with a no-unit observation (W14)
        assert head is not None and head.state is State.RESERVED and not head.spawn_marker
    if target is not None:
        assert tree_files(target) == []


def test_the_fixture_extension_loads_only_for_a_seat_under_the_fixture_root_and_is_refused_on_a_live_root(
        tree: FixtureTree, tmp_path: Path) -> None:
    """Issue 33: the seal's one extension (pi-rpc's fixture extension, `PiSpec.fixture_extension`) is for
    test seats: a seat whose session lives in a live location is refused `live-session-refused` at
    construction, before any argv is made; a fixture seat gets the sealed argv with the extension's exact
    path, and only with jiti's cache off in the engine's environment (`unsealed-engine` otherwise)."""
    sock = tmp_path / "sock"
    sock.mkdir(mode=0o700)
    spec = PiSpec(env={**tree.engine_env(), "JITI_FS_CACHE": "false"}, command=FAKE, fixture_extension=True)
    live = live_session(tree)
    refused_live(lambda: LaunchingController(
        Placement(**{**tree.placement(str(sock)), "session_file": str(live)}), spec, NeverLaunch(),  # type: ignore[arg-type]
        verifier=FixtureVerifier(), dialogs=True))
    assert os.listdir(tree.claims) == []
    seat = LaunchingController(Placement(**tree.placement(str(sock))), spec, NeverLaunch(),  # type: ignore[arg-type]
                               verifier=FixtureVerifier(), dialogs=True)
    argv = seat.engine.argv(seat.session_real)
    assert argv[argv.index("--extension") + 1].endswith("fixture_extension/dialogs.js")
    plain = LaunchingController(Placement(**tree.placement(str(sock))),
                                PiSpec(env=tree.engine_env(), command=FAKE), NeverLaunch(),  # type: ignore[arg-type]
                                verifier=FixtureVerifier())
    assert "--extension" not in plain.engine.argv(plain.session_real)
    uncached = PiSpec(env=tree.engine_env(), command=FAKE, fixture_extension=True).engine()
    with pytest.raises(Refusal) as caught:
        uncached.argv(seat.session_real)
    assert caught.value.code == "unsealed-engine" and "JITI_FS_CACHE" in caught.value.message
