"""IncreasingStamps: one stream's stamps stay in order when the clock conversion jitters back."""

import itertools

from na_common.stamps import IncreasingStamps


def test_a_stamp_dated_before_the_previous_one_moves_just_after_it():
    order = IncreasingStamps()
    # 500 Hz readings; the fourth was dated 70 us too early by a preempted clock conversion.
    dated = [1_000_000_000, 1_002_000_000, 1_004_000_000, 1_003_930_000, 1_008_000_000, 1_008_000_000]
    kept = [order.after_last(ns) for ns in dated]
    assert kept == [1_000_000_000, 1_002_000_000, 1_004_000_000, 1_004_000_001, 1_008_000_000, 1_008_000_001]
    assert all(b > a for a, b in itertools.pairwise(kept))
