"""`census`: the cohort's size now, what a force-stop confirmation shows. A count read through
the shim, unfrozen; it stops nothing, and a cohort that is gone (or a process group) has no count."""

from __future__ import annotations

from mosaic.cgroup_cohort.stop import census
from mosaic.cgroup_cohort.testing import alive


def test_census_counts_every_member_and_stops_nothing(lab):
    launched = lab.launch({"sleepers": 2, "term_ignorers": 1})
    ref = launched.ref
    expected = {m for m in launched.members()} | {ref.engine}
    counted = census(ref)
    assert counted.members == len(expected), (counted, expected)
    assert counted.complete
    assert all(alive(m) for m in expected)  # counting touched nothing
    result = lab.stop(launched)
    assert result.outcome.state == "stopped"
    emptied = census(ref)  # the shim still answers: engine/ is empty
    assert emptied.members == 0 and emptied.complete
    launched.handle.release(timeout=15)
    gone = census(ref)  # the shim is let go: no one to ask, so no count (never a 0 it did not read)
    assert gone.members is None and not gone.complete and "shim" in gone.detail
