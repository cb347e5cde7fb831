"""The package's public face (issue 31: the controller's client, installed alone): one module, whose
`__all__` is its private modules' `__all__` (`ci/facades.py` holds that), and whose import loads nothing of
the controller and nothing of safe-open but the refusal base and `safe_id`."""

from __future__ import annotations

import subprocess
import sys

import mosaic.controller_client as client
from mosaic.safe_open import Refusal


def _loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running `code` that are Mosaic's or cffi's, sorted."""
    code = (f"import sys\n{code}\n"
            "print(*sorted(m for m in sys.modules if m.startswith(('mosaic.', '_cffi', 'cffi', 'msgspec'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_importing_the_client_loads_its_own_modules_and_safe_opens_refusal_base_and_ids_only() -> None:
    loaded = _loaded_after("from mosaic.controller_client import *")
    allowed = {"mosaic.safe_open", "mosaic.safe_open._refusal", "mosaic.safe_open.ids", "mosaic.safe_open._ids"}
    stray = [m for m in loaded if m not in allowed and not m.startswith("mosaic.controller_client")]
    assert stray == [], stray  # no controller, no pi-format, no cffi (safe-open's ABI), no msgspec
    assert "mosaic.controller_client._transcript" in loaded  # the probe sees the client's own modules


def test_the_client_alone_loads_neither_the_transcript_nor_the_value_types_until_used() -> None:
    """Issue 34: `from mosaic.controller_client import ControllerClient` pulls only what the client runs on (the
    package's names load on first access, the value types' dataclasses on first use); the protocol table alone
    (what the controller's server imports) loads only that."""
    loaded = _loaded_after("from mosaic.controller_client import ControllerClient")
    assert "mosaic.controller_client._client" in loaded
    for module in ("mosaic.controller_client._transcript", "mosaic.controller_client._values",
                   "mosaic.safe_open.ids"):
        assert module not in loaded, module
    assert _loaded_after("import mosaic.controller_client") == ["mosaic.controller_client"]
    table = _loaded_after("from mosaic.controller_client import PARAMS, CLOSE_REASONS")
    assert table == ["mosaic.controller_client", "mosaic.controller_client._protocol"], table


def test_dir_is_exactly_all_and_every_name_resolves() -> None:
    assert dir(client) == sorted(client.__all__) and len(client.__all__) == len(set(client.__all__))
    for name in client.__all__:
        assert not name.startswith("_") and getattr(client, name) is not None, name


def test_every_refusal_the_client_raises_is_a_mosaic_refusal_and_protocol_errors_are_not() -> None:
    for kind in (client.ControlRefusal, client.RemoteRefusal, client.ClientRefusal):
        assert issubclass(kind, Refusal), kind
    assert issubclass(client.RemoteRefusal, client.ControlRefusal)
    for kind in (client.RemoteProtocolError, client.ConnectionLost, client.ClientStateError):
        assert not issubclass(kind, Refusal), kind
