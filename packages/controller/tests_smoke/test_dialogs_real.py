"""Pi's dialogs answered by the controller on the real pinned Pi 0.85.1 with pi-rpc's fixture extension
(issue 33, opt-in): the flows of `tests/dialog_flows.py` (P1, P2, P4, P5, P6, H5-H8), the real binary
raising each dialog on the scripted model's `DIALOG` cue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import dialog_flows
import pytest

from mosaic.controller.testing import real_controller
from mosaic.pi_rpc.testing import ModelServer

FLOWS = ['P1_H6_H7_a_confirm_answered_reaches_the_extension_once', 'P2_the_select_labels_are_exact_and_the_exact_label_reaches_the_extension', 'P4_H8_a_native_timeout_is_uncertain_then_settled_from_the_tool_end_and_a_late_answer_refused', 'P5_H5_takeover_while_pending_the_new_projection_answers_once', 'P6_H8_an_interrupt_while_pending_makes_it_uncertain_never_denied']


@pytest.mark.parametrize("flow", FLOWS)
def test_the_dialog_flows_on_the_real_pi(flow: str, tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    run: Callable[[str], Coroutine[Any, Any, None]] = getattr(dialog_flows, flow)

    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url, dialogs=True) as rig:
            await run(rig.socket_path)

    asyncio.run(main())
