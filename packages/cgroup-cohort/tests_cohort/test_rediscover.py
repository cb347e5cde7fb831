"""`Launcher.rediscover(unit)`: the live cohort's reference rebuilt from its shim, for a controller that
crashed after the launch and before it recorded the reference (seeds/003 W13), on both routes."""

from __future__ import annotations


def test_W13_rediscover_rebuilds_the_reference_the_launch_returned(lab):
    launched = lab.launch({"sleepers": 1})
    launcher = lab.launcher(lab.engine)
    found = launcher.rediscover(launched.ref.unit)
    assert found == launched.ref
    assert launcher.rediscover("cohort-claim-" + "0" * 32 + ".scope") is None  # nothing answers there
