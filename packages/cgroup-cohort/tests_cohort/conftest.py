"""The real-kernel cohort suite's fixtures come from the package's testing plugin (shared with the
controller's claim <-> cohort contract test): see mosaic/cgroup_cohort/testing/lab.py."""

pytest_plugins = ["mosaic.cgroup_cohort.testing.lab"]
