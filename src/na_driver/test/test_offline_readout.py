"""The offline generator reads an arm as the live driver does: the same registers give the same ArmState and
JointState fields through the driver (real SDK on the emulator's pty) and through ``na-sim generate``'s readout
(``na_sim.bus_readout`` on the register tables, no bus), for both servo families."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec, sts3215, xm430
from na_description.arm_state import ArmStateFields, arm_state_fields, joint_state_fields
from na_sim.bus_readout import arm_bus

# Fields a bus fills in (freshness, error counters, timing): not a decoding, compared elsewhere.
BUS_FIELDS = {"stale", "timeout_errors", "crc_errors", "partial_errors", "dropped_cycles", "bus_cycle_duration"}


def offline(spec, family: str, servos, reports_load: bool) -> ArmStateFields:
    states, goal = arm_bus(family, spec, servos).sync_read()
    return arm_state_fields(spec, "leader", states, goal, reports_load=reports_load, stale=[False] * spec.n_motors,
                            bus_cycle_duration=0.0)


def assert_same_fields(spec, live: ArmStateFields, generated: ArmStateFields) -> None:
    live_fields, generated_fields = live.message_fields(), generated.message_fields()
    for name in live_fields.keys() - BUS_FIELDS:
        np.testing.assert_array_equal(live_fields[name], generated_fields[name], err_msg=name)   # bit for bit
    for name, value in joint_state_fields(spec, live).items():
        np.testing.assert_array_equal(value, joint_state_fields(spec, generated)[name], err_msg=name)


@pytest.mark.parametrize("layout", ["indirect", "direct"])
def test_xm430_arm_reads_the_same_live_and_offline(emulated_arm, make_core, fresh_cycle, layout: str) -> None:
    emulator, servos = emulated_arm()
    servos[2].set("hardware_error_status", xm430.HW_ERROR_OVERLOAD)     # not in the block: read on the Alert bit
    core, _ = make_core(emulator.port_path, role="leader", layout=layout)
    core.start()
    try:
        live = fresh_cycle(core)
    finally:
        core.shutdown()
    spec = load_spec()
    generated = offline(spec, "xm430", servos, xm430.REPORTS_LOAD)
    assert not any(live.stale) and core.backend.layout.name == layout
    assert live.hardware_error.tolist() == [0, 0, xm430.HW_ERROR_OVERLOAD, 0, 0] and live.load.size == 0
    assert_same_fields(spec, live, generated)


def test_sts3215_arm_reads_the_same_live_and_offline(emulated_so101, make_core, fresh_cycle) -> None:
    emulator, servos = emulated_so101()
    for k, regs in enumerate(servos):          # a distinct state per servo, negative values on some
        regs.set("present_position", 1500 + 170 * k)
        regs.set("present_velocity", (-1) ** k * (30 + 11 * k))
        regs.set("present_load", (-1) ** (k + 1) * (90 + 40 * k))
        regs.set("present_current", (-1) ** k * (50 + 13 * k))
        regs.set("present_voltage", 118 + k)
        regs.set("present_temperature", 31 + k)
    servos[4].set("status", sts3215.STATUS_OVERHEAT)
    core, _ = make_core(emulator.port_path, role="leader", robot_spec="so101")
    core.start()
    try:
        live = fresh_cycle(core)
    finally:
        core.shutdown()
    spec = load_spec("so101")
    generated = offline(spec, "sts3215", servos, sts3215.REPORTS_LOAD)
    assert not any(live.stale) and live.hardware_error[4] == sts3215.STATUS_OVERHEAT and live.load.size == 6
    assert_same_fields(spec, live, generated)
