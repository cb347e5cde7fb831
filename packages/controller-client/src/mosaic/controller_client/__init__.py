"""mosaic.controller_client: the only way a terminal (or any other client) talks to a controller, installed
alone (issue 31): it depends on mosaic-safe-open and nothing else.

`ControllerClient` holds one connection to a controller's Unix socket (JSON-RPC 2.0, one message per LF
line) and mirrors the protocol's methods; `Transcript` is the view a terminal renders: the history page,
then the live stream, with the seam rules of the seed README ("The seam"). The rules each keeps are at
the top of `_client.py` and `_transcript.py`. The protocol itself is here as data, shared with the
controller's server: its methods and params (`PARAMS`, `ENUMS`, `RANGES`, `UNVERIFIED_METHODS`), its error
codes (`ERROR_CODES` and each code), the notifications and why a connection is closed (`CLOSE_REASONS`),
and the controller's refusal (`ControlRefusal`, its `CODES`).

Failures come in three kinds: refusals (`RemoteRefusal`, `ClientRefusal`; both subclass
`mosaic.safe_open.Refusal`, so ``except Refusal`` catches every Mosaic refusal), `RemoteProtocolError` (a
JSON-RPC error that is not a refusal), and `ConnectionLost` (the outcome of a written command is
unknown). `ControllerClient.prompt` returns all of its outcomes as values: `Admitted`, `Duplicate`,
`Refused`, `AdmissionUnknown`.

    client = await ControllerClient.connect(socket_path)
    view = Transcript(client)          # before observe: it takes the seam in stream order
    view.start()
    await client.observe()
    await client.takeover()
    outcome = await client.prompt("hello")
    match outcome:
        case Admitted(request=request): ...          # request.state follows its receipt
        case Refused(refusal=refusal): ...           # the text stays with the caller
        case AdmissionUnknown(): ...                   # shown as "outcome unknown"; never resent
"""

from __future__ import annotations

from . import _client, _errors, _protocol, _refusal, _transcript
from ._client import *  # noqa: F403
from ._errors import *  # noqa: F403
from ._protocol import *  # noqa: F403
from ._refusal import *  # noqa: F403
from ._transcript import *  # noqa: F403

__all__: list[str] = []
__all__ += _client.__all__
__all__ += _errors.__all__
__all__ += _protocol.__all__
__all__ += _refusal.__all__
__all__ += _transcript.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
