"""mosaic.controller: one controller per execution of a headless Pi engine, and the clients that observe,
prompt, take control, interrupt, force stop with a proof and recover (brief §1-§6, §9).

    from mosaic.controller import LaunchingController, PiSpec, Placement

    controller = LaunchingController(Placement(fixture_root=root, claim_root=claims, session_file=session,
                                               socket_dir=private_dir, home=home),
                                     PiSpec(env=env, pi_dir=pi_dir), launcher, verifier=verifier)
    await controller.start()     # claim, launch in a cohort, load check, serve the socket
    ...                          # clients: mosaic.controller.client.ControllerClient
    await controller.aclose()    # stop serving; the engine, its cohort and its claim stay

The top level holds what runs a controller. The rest is in public modules: `.client` (the client
library), `.core` (the sans-io core and its inputs and actions), `.tables` (the controller's tables),
`.server` (the socket server), `.protocol` (methods, codes, the wire format), `.access` (who may connect),
`.drift` (session drift), `.lifecycle` (the claim-backed lifecycle and the claim <-> cohort adapter),
`.runtime` (the shell around the core), `.route` (which launcher this host has), `.plain` (refusals in
plain words) and `.testing` (rigs for tests).

Importing the package loads none of its modules: each name loads its module on first use, so
`mosaic.controller.client` (the terminal's, any client's) does not pay for the core, the server, the
lifecycle or cgroup-cohort.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.controller_client import ControlRefusal

    from .core._access import Grants
    from .core._state import Bounds
    from .engines.pi._spec import PiSpec
    from .lifecycle._engine_uids import EngineUids
    from .lifecycle._launching import Hooks, LaunchingController, Placement
    from .server._limits import ServerLimits

_LAZY: dict[str, str] = {
    "Bounds": "core._state",
    "ControlRefusal": "mosaic.controller_client",  # the client package's class, re-exported
    "LaunchingController": "lifecycle._launching",
    "PiSpec": "engines.pi._spec",
    "EngineUids": "lifecycle._engine_uids",
    "Grants": "core._access",
    "Hooks": "lifecycle._launching",
    "Placement": "lifecycle._launching",
    "ServerLimits": "server._limits",
}

__all__ = [
    "Bounds",
    "ControlRefusal",
    "LaunchingController",
    "PiSpec",
    "EngineUids",
    "Grants",
    "Hooks",
    "Placement",
    "ServerLimits",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module if module.startswith("mosaic.") else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
