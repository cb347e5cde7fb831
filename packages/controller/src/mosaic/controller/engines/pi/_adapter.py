"""The Pi engine for the lifecycle (`PiEngine`, the seam's `Engine`; `PiSpec.engine()` makes one): where a Pi
session file is and what it holds (`engines/pi/_session`), the sealed argv and its pins, whether Pi can load
the session without writing to it, K8's load check (`engines/pi/_launch`), the history pages an observe
serves (`engines/pi/_history`), the drift check's configuration and the core's rules (`PI_RULES`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mosaic.cgroup_cohort import EngineLimits
from mosaic.chat_pages import conversation_id
from mosaic.pi_rpc import EngineLink
from mosaic.writer_claim import Pins

from .._seam import EngineRules, PageReader, Place, SessionRead
from .._verdict import DriftConfig
from ._history import history_reader
from ._launch import EngineDescription, current_pins, load_check, loadable, sealed_argv
from ._session import SessionIdentity, SessionPlace, read_session, session_place
from ._wire import PI_RULES

__all__ = ["PiEngine"]


class PiEngine:
    """The pinned Pi (or a test command standing for it) as the lifecycle uses it."""

    name = "pi"  # the claim's session key and the binding record

    def __init__(self, spec: EngineDescription, *, env: Mapping[str, str], limits: EngineLimits | None,
                 state_dirs: tuple[str, ...]) -> None:
        self.spec = spec
        self.env = env
        self.limits = limits
        self.state_dirs = state_dirs

    @property
    def rules(self) -> EngineRules:
        return PI_RULES

    def place(self, session_path: str) -> SessionPlace:
        return session_place(session_path)

    def read(self, place: Place) -> SessionIdentity:
        return read_session(_pi(place))

    def conversation(self, place: Place) -> str:
        return conversation_id(place.project, place.seat, place.name)

    def argv(self, session_path: str, *, uids: range | None = None) -> list[str]:
        return sealed_argv(self.spec, session_path)  # Pi's seal names no uid: the same argv for every one

    def pins(self, argv: Sequence[str]) -> Pins:
        return current_pins(self.spec, argv)

    def bind(self, argv: Sequence[str], *, uid: int | None = None) -> None:
        """Pi's pins are checked at construction and at recover (`engines/pi/_launch` rule 1): nothing more at bind."""

    def loadable(self, identity: SessionRead) -> None:
        loadable(_identity(identity))

    async def load_check(self, link: EngineLink, *, bound: float, session_file: str, identity: SessionRead,
                         step: Callable[[str], None]) -> str | None:
        return await load_check(link, bound=bound, session_file=session_file, identity=_identity(identity),
                                step=step)

    def drift(self, identity: SessionRead) -> DriftConfig:
        return DriftConfig(identity.header_id)

    def history(self, place: Place) -> tuple[str, PageReader]:
        return history_reader(Path(place.project), Path(place.path), seat=place.seat)


def _pi(place: Place) -> SessionPlace:
    """A place this adapter made (`PiEngine.place`): the lifecycle hands back what the engine gave it."""
    assert isinstance(place, SessionPlace), place
    return place


def _identity(identity: SessionRead) -> SessionIdentity:
    assert isinstance(identity, SessionIdentity), identity
    return identity
