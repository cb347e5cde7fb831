"""Pin and seal are checked before anything is claimed or spawned (brief §2 "Fields": the engine pins;
pi-rpc's `engine-pin-mismatch` and `unsealed-engine`).

The controller is constructed over a fixture tree in tmp_path with a launcher that fails the test if it is
ever asked to launch; a refusal must leave the claim root empty.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import FixtureVerifier
from mosaic.controller import LaunchingController, PiSpec, Placement
from mosaic.controller.testing import FixtureTree
from mosaic.safe_open import Refusal
from mosaic.writer_claim import ClaimStore

FAKE = ("/usr/bin/python3", "-m", "mosaic.pi_rpc.testing.fake_engine")


class NeverLaunch:
    """A launcher the refused controller must never use."""

    def launch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused controller launched an engine")

    def rediscover(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused controller looked for a cohort")

    def prewarm(self, **kwargs: Any) -> bool:
        return False

    def close(self) -> None:
        pass


@pytest.fixture
def tree(tmp_path: Path) -> FixtureTree:
    t = FixtureTree(tmp_path / "fx")
    t.make((os.getuid(), os.getgid()))
    return t


def refused(tree: FixtureTree, tmp_path: Path, spec: PiSpec) -> Refusal:
    with pytest.raises(Refusal) as caught:
        LaunchingController(Placement(**tree.placement(str(tmp_path / "sock"))), spec, NeverLaunch(),  # type: ignore[arg-type]
                            verifier=FixtureVerifier())
    assert os.listdir(tree.claims) == []  # nothing reserved, no spawn marker: nothing was claimed
    return caught.value


def test_a_pi_dir_that_is_not_the_pinned_install_is_engine_pin_mismatch_before_any_claim(
        tree: FixtureTree, tmp_path: Path) -> None:
    fake_install = tmp_path / "pi"
    (fake_install / "node_modules" / "@earendil-works" / "pi-coding-agent").mkdir(parents=True)
    (fake_install / "package.json").write_text('{"dependencies": {}}\n')
    refusal = refused(tree, tmp_path, PiSpec(env=tree.engine_env(), pi_dir=str(fake_install)))
    assert refusal.code == "engine-pin-mismatch", refusal.to_dict()


@pytest.mark.parametrize("spec", [
    {"command": (*FAKE, "--extension", "/tmp/evil.js")},  # a pre-argument that is a Pi option
    {"command": (*FAKE, "--no-session")},
    {"command": FAKE, "model": "--tools"},  # a value that is not plain
    {"command": FAKE, "provider": "@/etc/passwd"},  # an @ value (Pi's CLI file argument form)
    {"command": FAKE, "thinking": "-x"},
], ids=["extension", "no-session", "model-flag", "provider-at-file", "thinking-flag"])
def test_an_engine_outside_the_seal_is_unsealed_engine_before_any_claim(
        tree: FixtureTree, tmp_path: Path, spec: dict[str, Any]) -> None:
    refusal = refused(tree, tmp_path, PiSpec(env=tree.engine_env(), **spec))
    assert refusal.code == "unsealed-engine", refusal.to_dict()


def test_a_start_on_a_pair_a_live_controller_holds_uncertain_refuses_already_active_not_unsafe_replacement(
        tree: FixtureTree, tmp_path: Path) -> None:
    """Issue 28 item 6: the loser of two starts at once on a crashed controller's claim can classify the pair
    after the winner adopted it: an uncertain claim (the orphan, served uncertain) whose owner is alive. The
    owner check says owner-alive, yet the refusal raised was the pair's state-based one, unsafe-replacement,
    which sends an operator to repair a claim that is fine. A live owner is a live start: already-active,
    whatever the state, with nothing published and nothing launched."""
    spec = PiSpec(env=tree.engine_env(), command=FAKE)
    controller = LaunchingController(Placement(**tree.placement(str(tmp_path / "sock"))), spec, NeverLaunch(),  # type: ignore[arg-type]
                                     verifier=FixtureVerifier())
    # The winner: another store in a live process (this one), holding the pair uncertain as an adopted orphan.
    winner = ClaimStore(str(tree.claims)).acquire(controller.seat_key, controller.session_key, controller._binding())
    winner.mark_spawn()
    winner.mark_uncertain()
    before = {key: ClaimStore(str(tree.claims)).read_chain(key) for key in (controller.seat_key, controller.session_key)}
    with pytest.raises(Refusal) as caught:
        asyncio.run(controller.start())
    assert caught.value.code == "already-active", caught.value.to_dict()
    after = {key: ClaimStore(str(tree.claims)).read_chain(key) for key in (controller.seat_key, controller.session_key)}
    assert after == before  # nothing published over the live owner


def test_an_engine_state_directory_outside_the_fixture_root_is_refused_at_construction(
        tree: FixtureTree, tmp_path: Path) -> None:
    """Issue 28 item 3: the engine's state directories are handed to each allocated engine uid (chowned) before
    its launch; one outside the fixture root, or under a live location (~/.pi here: the operator's home), is
    refused `live-session-refused` before anything is claimed."""
    for outside in (str(tmp_path), str(tree.root / "operator-home" / ".pi" / "agent")):
        refusal = refused(tree, tmp_path, PiSpec(env=tree.engine_env(), command=FAKE, state_dirs=(outside,)))
        assert refusal.code == "live-session-refused" and "engine state directory" in refusal.message, refusal.to_dict()
