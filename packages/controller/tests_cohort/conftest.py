"""The controller's real-kernel suite (`nox -s cohort`): the launch routes, the systemd sandbox and the
cleanup sweep come from cgroup-cohort's testing plugin, the same fixtures its own K suite uses."""

pytest_plugins = ["mosaic.cgroup_cohort.testing.lab"]
