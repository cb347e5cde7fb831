"""`ControlRefusal`, as the controller's rooms import it: the one class and its code table are
mosaic-controller-client's (`mosaic.controller_client`), so a client catches exactly what the controller
raises (issue 31: the client installs alone)."""

from __future__ import annotations

from mosaic.controller_client import ControlRefusal

__all__ = ["ControlRefusal"]
