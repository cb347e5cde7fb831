"""What a lifecycle is given besides its engine: where it may act (`Placement`) and the test seams it calls
(`Hooks`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mosaic.pi_rpc.link import LinkEvent
from mosaic.writer_claim import BarrierHook

__all__ = ["Hooks", "Placement"]


@dataclass(frozen=True)
class Placement:
    """Where a controller may act. Every path is an argument (DESIGN principle 3); `home` says whose
    `~/.pi`, `~/.claude` and `~/.mosaic-dev` are live (the guard refuses them), `repository` a checkout
    whose `.pi/state/` is live, `registrations` the paths seat registrations name."""

    fixture_root: str
    claim_root: str
    session_file: str
    socket_dir: str
    home: str
    repository: str | None = None
    data_root: str | None = None
    registrations: tuple[str, ...] = ()
    workspace: str | None = None  # the seat tuple's workspace; the project root when None


@dataclass
class Hooks:
    """Test seams (never set in production): called at each launch or recover step, each published stop
    phase and each batch of engine link events before the core sees it, so a test can SIGKILL the
    controller at an exact step (W13, W14, W20, K10, K11, recover and the launcher's call) or between a
    prompt's complete write and its ack (H20)."""

    on_launch_step: Callable[[str], None] | None = None
    on_stop_phase: Callable[[str], None] | None = None
    barrier: BarrierHook | None = None
    on_engine_events: Callable[[list[LinkEvent]], None] | None = None
