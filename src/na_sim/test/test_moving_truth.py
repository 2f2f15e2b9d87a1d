"""The read-counter truth and its oracle: can it tell a fresh value from a stale, late or mixed one?"""

from __future__ import annotations

import math
from types import SimpleNamespace

from na_sim.moving_truth import JointMap, ReadCounterTruth, ServedRead, check_published, values_of_read
from na_sim.servo_registers import ServoRegisters

JOINTS = [JointMap(11, 1, 0.0), JointMap(12, -1, 0.5)]


def published(record: ServedRead, joint: JointMap) -> tuple[float, ...]:
    """What a correct driver publishes for ``record`` (conversions written independently here)."""
    angle = (record.position - 2048) * 2 * math.pi / 4096
    return (joint.direction * angle + joint.homing_offset, joint.direction * record.velocity * 0.229 * 2 * math.pi / 60,
            joint.direction * record.current * 0.00269, record.voltage * 0.1, float(record.temperature))


def sample(stamp: float, duration: float, records: list[ServedRead | None]) -> SimpleNamespace:
    values = [published(r, j) if r is not None else (math.nan,) * 5 for r, j in zip(records, JOINTS, strict=True)]
    columns = list(zip(*values, strict=True))
    return SimpleNamespace(stamp=stamp, bus_cycle_duration=duration, stale=[r is None for r in records],
                           position=columns[0], velocity=columns[1], current=columns[2], input_voltage=columns[3],
                           temperature=columns[4])


def read(servo_id: int, at: float, count: int) -> ServedRead:
    v = values_of_read(count)
    return ServedRead(servo_id, at, v["present_position"], v["present_velocity"], v["present_current"],
                      v["present_pwm"], v["present_input_voltage"], v["present_temperature"])


# two cycles of two servos: reads at t = 1.000 s (previous cycle) and 1.010 s (this cycle, window 1.009-1.012)
OLD11, OLD12, NEW11, NEW12 = read(11, 1.000, 1), read(12, 1.000, 1), read(11, 1.010, 2), read(12, 1.010, 2)
LOG = [OLD11, OLD12, NEW11, NEW12]


def test_every_read_changes_all_published_quantities() -> None:
    first, second = values_of_read(1), values_of_read(2)
    assert all(first[name] != second[name] for name in first)
    assert all(values_of_read(k)["present_temperature"] < 55 for k in range(200))     # below the driver's warning
    servo = ServoRegisters(11)
    truth = ReadCounterTruth([servo])
    truth(servo)
    truth(servo)
    assert [r.position for r in truth.records] == [values_of_read(1)["present_position"],
                                                   values_of_read(2)["present_position"]]


def test_the_oracle_accepts_what_was_served_during_the_cycle() -> None:
    check = check_published([sample(1.012, 0.003, [NEW11, NEW12])], LOG, JOINTS)
    assert (check.fresh, check.stale, check.wrong) == (2, 0, [])


def test_the_oracle_flags_a_late_value_a_mix_and_a_changed_stale_value() -> None:
    # a late reply: servo 11's value of the previous cycle, published as fresh
    assert len(check_published([sample(1.012, 0.003, [OLD11, NEW12])], LOG, JOINTS).wrong) == 1
    # position of one read, current of another
    mixed = sample(1.012, 0.003, [NEW11, NEW12])
    mixed.current = (published(OLD11, JOINTS[0])[2], mixed.current[1])
    assert len(check_published([mixed], LOG, JOINTS).wrong) == 1
    # a stale flag must carry the last fresh value (NaN before the first), not a new one
    first = sample(1.002, 0.003, [OLD11, None])
    second = sample(1.012, 0.003, [NEW11, NEW12])
    second.stale = [True, True]
    check = check_published([first, second], LOG, JOINTS)
    assert (check.fresh, check.stale) == (1, 3) and len(check.wrong) == 2     # 11 changed; 12 was never fresh


def test_a_wrong_value_is_set_apart_only_when_an_unseen_corruption_of_its_servo_explains_it() -> None:
    late = sample(1.012, 0.003, [OLD11, NEW12])                   # servo 11 publishes a value not served now
    in_cycle = SimpleNamespace(servo_id=11, time=1.0105)
    for undetected, wrong in [([in_cycle], 0), ([SimpleNamespace(servo_id=12, time=1.0105)], 1),
                              ([SimpleNamespace(servo_id=11, time=1.002)], 1)]:   # its servo, inside the cycle
        check = check_published([late], LOG, JOINTS, undetected)
        assert (len(check.wrong), len(check.undetected)) == (wrong, 1 - wrong)
