#!/bin/sh
# Idempotently create the unprivileged engine user of the cohort suite (cgroup-facts.md §7.11).
# The engine runs under this uid, which owns no ancestor of engine/, so K13 escapes get EACCES (facts §4.4).
set -eu
USER_NAME="${1:-cohorttest}"
id -u "$USER_NAME" >/dev/null 2>&1 || useradd -m "$USER_NAME"
id "$USER_NAME"
