"""The dialog flows of `dialog_flows.py` (issue 33: P1, P2, P4, P5, P6, H5-H8) through the socket on the fake
engine with the fixture extension (the fake raises and settles dialogs as Pi 0.85.1 does, held to the dialog
goldens by pi-rpc's conformance suite); the same flows run on the real Pi in tests_smoke."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import dialog_flows

from mosaic.controller.testing import fake_controller


def _run(flow: Callable[[str], Coroutine[Any, Any, None]], root: Path) -> None:
    async def main() -> None:
        async with fake_controller(root, dialogs=True) as rig:
            await flow(rig.socket_path)

    asyncio.run(main())


def test_P1_H6_H7_a_confirm_answered_reaches_the_extension_once_on_the_fake_engine(tmp_path: Path) -> None:
    _run(dialog_flows.P1_H6_H7_a_confirm_answered_reaches_the_extension_once, tmp_path / "rig")


def test_P2_the_select_labels_are_exact_and_the_exact_label_reaches_the_extension_on_the_fake_engine(tmp_path: Path) -> None:
    _run(dialog_flows.P2_the_select_labels_are_exact_and_the_exact_label_reaches_the_extension, tmp_path / "rig")


def test_P4_H8_a_native_timeout_is_uncertain_then_settled_from_the_tool_end_and_a_late_answer_refused_on_the_fake_engine(tmp_path: Path) -> None:
    _run(dialog_flows.P4_H8_a_native_timeout_is_uncertain_then_settled_from_the_tool_end_and_a_late_answer_refused, tmp_path / "rig")


def test_P5_H5_takeover_while_pending_the_new_projection_answers_once_on_the_fake_engine(tmp_path: Path) -> None:
    _run(dialog_flows.P5_H5_takeover_while_pending_the_new_projection_answers_once, tmp_path / "rig")


def test_P6_H8_an_interrupt_while_pending_makes_it_uncertain_never_denied_on_the_fake_engine(tmp_path: Path) -> None:
    _run(dialog_flows.P6_H8_an_interrupt_while_pending_makes_it_uncertain_never_denied, tmp_path / "rig")
