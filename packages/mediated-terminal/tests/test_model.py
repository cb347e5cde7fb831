"""`TerminalModel` without a terminal, against a real controller on the fake engine: the composer rules
(S4, S5) and the refusal path, with a plain composer standing in for the prompt_toolkit buffer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from term_harness import WAIT, run

from mosaic.controller import Grants
from mosaic.controller.core import Effect
from mosaic.controller.testing import FakeRig, RawClient, fake_controller, no_cohort_effects
from mosaic.controller_client import Admitted, Refused
from mosaic.mediated_terminal import TerminalModel
from mosaic.mediated_terminal.model import NOT_CONTROLLER, CannotAttach
from mosaic.mediated_terminal.testing import EngineTap


class Plain:
    def __init__(self) -> None:
        self.text = ""

    def clear(self) -> None:
        self.text = ""

    def restore(self, text: str) -> None:
        self.text = text


@contextlib.asynccontextmanager
async def model_on(root: Path, **options: Any) -> AsyncIterator[tuple[FakeRig, EngineTap, Plain, TerminalModel]]:
    """A controller on the fake engine (`options` go to `fake_controller`), a tap on its engine link, and a
    started model over a plain composer."""
    async with fake_controller(root, **options) as rig:
        tap = EngineTap(rig.core.link)
        composer = Plain()
        model = TerminalModel(rig.socket_path, composer, ping_interval=None)
        try:
            await model.start()
            yield rig, tap, composer, model
        finally:
            await model.aclose()


def test_the_model_keeps_the_composer_rules(tmp_path: Path) -> None:
    async def main() -> None:
        async with model_on(tmp_path / "rig") as (rig, tap, composer, model):
            assert model.client.role == "observer" and not model.controls and model.disconnected is None
            composer.text = "typed somehow"  # the app's buffer is read-only; the model refuses anyway
            assert await model.submit() is None
            assert model.notes[-1].text == NOT_CONTROLLER and tap.since(0) == b""
            assert model.notes[-1].kind == "refusal"
            assert composer.text == "typed somehow"  # an observer's Enter changes nothing
            await model.takeover()
            assert model.controls and composer.text == ""  # taking control is a transfer: cleared
            # A refused prompt (the text policy) sends zero engine bytes and its text comes back.
            composer.text = "/skill:x"
            outcome = await model.submit()
            assert isinstance(outcome, Refused) and outcome.refusal.code == "text-policy"
            assert composer.text == "/skill:x" and tap.since(0) == b""
            assert model.notes[-1].text.startswith("not admitted: text-policy")
            # Another client takes control: cleared, set aside in a note, never sent.
            other = await RawClient.connect(rig.socket_path)
            observed = (await other.call("observe"))["result"]
            await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
            await asyncio.wait_for(model.client.wait_until(lambda: model.client.role == "observer"), WAIT)
            await asyncio.wait_for(model.client.wait_until(lambda: composer.text == ""), WAIT)
            assert any('set aside, never sent: "/skill:x"' in n.text for n in model.notes)
            assert any(n.text.startswith("connection ") and "took control (generation 3)" in n.text
                       for n in model.notes)
            await other.close()
            await model.takeover()
            composer.text = "Say hello"
            sent = await model.submit()
            assert isinstance(sent, Admitted) and composer.text == ""  # cleared on submit
            settled = await asyncio.wait_for(model.client.wait_settled(sent.request.client_request_id), WAIT)
            assert settled.receipt_state == "finished"
            assert [r["message"] for r in EngineTap.records(tap.since(0)) if r["type"] == "prompt"] == ["Say hello"]

    run(main)


def test_enter_takes_the_composer_at_once_and_the_send_uses_what_it_took(tmp_path: Path) -> None:
    async def main() -> None:
        async with model_on(tmp_path / "rig") as (rig, tap, composer, model):
            await model.takeover()
            composer.text = "first"
            taken = model.take_composer()
            assert taken == "first" and composer.text == ""  # cleared before anything else runs
            composer.text = "second"  # the rest of the chunk, typed before the send runs
            sent = await model.send(taken)
            assert isinstance(sent, Admitted) and composer.text == "second"
            await asyncio.wait_for(model.client.wait_settled(sent.request.client_request_id), WAIT)
            assert [r["message"] for r in EngineTap.records(tap.since(0)) if r["type"] == "prompt"] == ["first"]
            composer.text = "   "
            assert model.take_composer() is None and composer.text == "   "  # blank: nothing taken

    run(main)


def test_attaching_to_a_missing_socket_raises_one_line(tmp_path: Path) -> None:
    async def main() -> None:
        model = TerminalModel(str(tmp_path / "nothing.sock"), Plain(), ping_interval=None)
        try:
            await model.start()
        except CannotAttach as exc:
            assert str(exc) == (f"no controller socket at {tmp_path / 'nothing.sock'} (no such file; is the "
                                "controller running?)")
        else:
            raise AssertionError("attached to nothing")
        finally:
            await model.aclose()

    run(main)


def test_a_grant_says_hello_on_each_connection_and_the_terminal_may_do_only_what_it_allows(tmp_path: Path) -> None:
    """`mosaic-terminal --grant ID`: every connection of the model starts with the seed's hello naming the
    grant (the first attach and a reconnect alike); the grant allows observe only, so taking control is
    refused `capability` and the prompt path stays closed. A grant the controller does not know is refused
    `grant` at the attach: one line."""
    grants = Grants(users={4321: frozenset({"observe"})}, ids={"viewer": ("uid", 4321)})

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=grants) as rig:
            model = TerminalModel(rig.socket_path, Plain(), ping_interval=None, grant="viewer")
            try:
                await model.start()
                assert model.client.granted is not None and model.client.granted["operations"] == ["observe"]
                assert "grant viewer: observe" in model.notes[-1].text
                await model.takeover()
                assert not model.controls and model.notes[-1].kind == "refusal"
                assert "capability" in model.notes[-1].text
                await model.reconnect()  # a new connection: the hello again, first
                assert model.client.granted["grant"] == "viewer" and model.disconnected is None
                await model.takeover()
                assert not model.controls and "capability" in model.notes[-1].text
            finally:
                await model.aclose()
            stranger = TerminalModel(rig.socket_path, Plain(), ping_interval=None, grant="nobody-knows")
            try:
                await stranger.start()
            except CannotAttach as exc:
                assert "grant: no active grant 'nobody-knows'" in str(exc)
            else:
                raise AssertionError("attached under a grant the controller does not have")
            finally:
                await stranger.aclose()

async def proven_stop(effect: Effect) -> Mapping[str, Any]:
    """A lifecycle stand-in whose force stop is proven (a scripted proof)."""
    if effect.kind == "force-stop":
        return {"state": "stopped", "proof": {"members": [], "membershipComplete": True,
                                              "verification": {"digest": "sha256:" + "ab" * 32}}}
    return await no_cohort_effects(effect)


def test_the_next_step_after_a_proven_force_stop_is_one_note_in_either_order_of_its_records(tmp_path: Path) -> None:
    async def main() -> None:
        async with model_on(tmp_path / "rig", effects=proven_stop) as (rig, tap, composer, model):
            seen = model.client.subscribe()
            await model.takeover()
            await model.request_force_stop()
            await model.answer(True)
            stop_id = next(iter(model.client.stops))
            await asyncio.wait_for(model.client.wait_stop(stop_id), WAIT)
            await asyncio.wait_for(model.client.wait_until(
                lambda: any(n.text.startswith("next: Ctrl-R") for n in model.notes)), WAIT)
            # The model's pump reads a queue behind the client: it may handle the proof's record after the
            # client already holds the stop's end, or before. Handled again in the late order, they must
            # still leave one "next:" note.
            notes = []
            while (note := seen.get_nowait()) is not None:
                notes.append(note)
            for note in notes:
                model._on_note(note)
            texts = [n.text for n in model.notes]
            assert sum(t.startswith("next:") for t in texts) == 1, texts

    run(main)
