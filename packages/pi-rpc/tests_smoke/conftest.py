"""The smoke suite: the real sealed Pi 0.85.1, in a loopback-only network namespace.

The fixtures (the namespace check, the pinned install, the scripted model server) are
`mosaic.pi_rpc.testing.smoke_plugin`'s, shared with the controller's smoke suite: a missing install or a
run outside the namespace fails loudly, never skips into a green run.
"""

pytest_plugins = ["mosaic.pi_rpc.testing.smoke_plugin"]
