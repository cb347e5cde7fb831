"""The writer claim's refusals: one code table (seed README "Refusals": already-active, unsafe-replacement,
foreign-host, "the writer claim (W2, W3, W17)"; eligibility, the seed build's name for "launch with a used
or unknown eligibility record ... or a changed reservation (K17)")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["ClaimRefusal"]


class ClaimRefusal(Refusal):
    """Why the claim store refused to acquire, adopt, take over or publish.

    - already-active: the pair is reserved or active under a claim, or its owner is alive (W1, W2, W12);
    - unsafe-replacement: the pair is stopping, uncertain, stopped without proof, unreadable, or its two
      keys name different claim IDs (W3, W16); also a publication on a key this claim holds that lost to
      another writer;
    - foreign-host: a revision at a head was written on another machine (W17). Nothing is written;
    - eligibility: a take-over whose claim is not the pair's reservation for that eligibility any more, or
      never was: another or no claim, the eligibility already taken (a second launcher, K17), another
      eligibility ID, a claim no longer reserved, a spawn marker, or a take-over that lost a link() race.

    reconcile is False for all four. In this project reconcile means "your view is stale: re-read and
    retry" (the reader's cursor refusals). None of these clears by re-reading: each needs the claim's
    owner to release it with a proof, a restart classification, or an operator (and a consumed or stale
    eligibility never becomes valid again), so a client told "reconcile" would only loop.
    """

    CODES: ClassVar[Mapping[str, bool]] = {
        "already-active": False,
        "unsafe-replacement": False,
        "foreign-host": False,
        "eligibility": False,
    }
