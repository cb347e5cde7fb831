"""`mosaic-read --config FILE`: the file decoded strictly with msgspec, so a bad file is refused with the
field it got wrong (`$.specs[0].seat`), never half-read. Imported only when --config is given (msgspec's
import is most of the reader's start-up cost).

    {"specs": [{"projectRoot", "seat", "layoutRepo"?, "harness"?, "claudeRoot"?}],
     "registrations": [{"seat", "harness", "layoutRepo", "project", "sessionsDir", "startedAt"}]}

Both lists are optional; an unknown field anywhere is refused (a misspelt `sesionsDir` must not silently
drop a registration). `layoutRepo` of a spec defaults to its `projectRoot`; `harness` to `"pi"`; a
`"claude-code"` spec names its Claude config directory in `claudeRoot` (issue 30).
"""

from __future__ import annotations

import msgspec

from ._sources import PI_HARNESS, RepositorySpec, SeatRegistration


class _Spec(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    project_root: str
    seat: str
    layout_repo: str | None = None
    harness: str = PI_HARNESS
    claude_root: str | None = None


class _Registration(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    seat: str
    harness: str
    layout_repo: str
    project: str
    sessions_dir: str
    started_at: str


class _Config(msgspec.Struct, forbid_unknown_fields=True):
    specs: list[_Spec] = msgspec.field(default_factory=list)
    registrations: list[_Registration] = msgspec.field(default_factory=list)


class ConfigError(ValueError):
    """The config file could not be used; the message says where (`$.path` of the field) and why."""


def load_config(data: bytes) -> tuple[list[RepositorySpec], list[SeatRegistration]]:
    """The specs and registrations a config file's bytes hold. Raises ConfigError naming the bad field
    (msgspec's path, e.g. "Expected `str`, got `int` - at `$.specs[0].seat`") or the JSON error."""
    try:
        cfg = msgspec.json.decode(data, type=_Config)
    except msgspec.ValidationError as e:
        raise ConfigError(str(e)) from None
    except msgspec.DecodeError as e:
        raise ConfigError(f"not JSON: {e}") from None
    specs = [RepositorySpec(s.project_root, s.seat, s.layout_repo or s.project_root, s.harness, s.claude_root)
             for s in cfg.specs]
    regs = [SeatRegistration(r.seat, r.harness, r.layout_repo, r.project, r.sessions_dir, r.started_at)
            for r in cfg.registrations]
    return specs, regs
