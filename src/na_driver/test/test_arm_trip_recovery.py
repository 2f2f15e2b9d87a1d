"""A follower tripped by a servo that fell silent: the trip status it reports, and ~/reboot bringing it back
(torque on at the present pose) without restarting anything."""

from __future__ import annotations

import time

import numpy as np
import pytest

from na_driver.arm_config import build_config
from na_driver.arm_core import ArmDriverCore
from na_sim.faults import DxlFaultInjector, DxlFaults

ERROR_TIMEOUT_S = 0.2
STALL_S = 1.0


def make_core(port: str) -> ArmDriverCore:
    config = build_config({"port": port, "role": "follower", "error_timeout": ERROR_TIMEOUT_S, "reply_timeout": 0.02})
    return ArmDriverCore(config, log=lambda level, message: None)


def cycle_until(core: ArmDriverCore, condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        core.cycle()
        time.sleep(0.01)                          # pacing a 100 Hz loop
    return condition()


def test_a_servo_that_fell_silent_trips_the_follower_and_reboot_recovers_it(emulated_arm) -> None:
    emulator, servos = emulated_arm()
    core = make_core(emulator.port_path)
    core.start()
    stall = (emulator.elapsed_s + 0.2, emulator.elapsed_s + 0.2 + STALL_S)
    emulator.injector = DxlFaultInjector(DxlFaults(stall_servo_id=13, stall_window_s=stall))
    try:
        assert core.trip_status() == (0, "not tripped")
        assert cycle_until(core, lambda: not core.torque_enabled, 10.0)
        level, message = core.trip_status()
        assert level == 2 and message.startswith("follower tripped, torque off and holding: servo 13 (joint3): "
                                                 "no valid reply for")
        # Every servo that answers is torque-off (the silent one cannot be told).
        assert [r.get("torque_enable") for k, r in enumerate(servos) if k != 2] == [0] * 4
        # The servo answers again once the stall is over; the trip holds until the reboot.
        assert cycle_until(core, lambda: emulator.elapsed_s > stall[1] + 0.1, 10.0)
        core.cycle()
        assert core.trip_status()[0] == 2 and not core.torque_enabled
        servos[1].set("present_position", servos[1].get("present_position") + 150)      # the arm sagged meanwhile
        message = core.reboot_tripped()
        assert "servo 13" in message and "torque on at the present pose" in message
        assert all(r.get("torque_enable") == 1 for r in servos)
        assert [r.get("goal_position") for r in servos] == [r.get("present_position") for r in servos]
        assert core.torque_enabled and core.trip_status() == (0, "not tripped")
        # Its error timeout counts from the reboot: the servo is not reported silent again.
        for _ in range(int(3 * ERROR_TIMEOUT_S / 0.01)):
            sample = core.cycle()
            time.sleep(0.01)
        assert core.trip_status()[0] == 0 and core.torque_enabled and not any(sample.stale)
        assert np.all(np.isfinite(sample.position))
    finally:
        core.shutdown()


@pytest.mark.node
def test_the_driver_publishes_the_trip_and_its_end_on_diagnostics(ros_context, emulated_arm, wait_for) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from na_driver.arm_driver_node import ArmDriverNode

    emulator, servos = emulated_arm()
    follower = ArmDriverNode(context=ros_context, namespace="follower", parameter_overrides=[
        Parameter("port", value=emulator.port_path), Parameter("role", value="follower"),
        Parameter("error_timeout", value=ERROR_TIMEOUT_S), Parameter("reply_timeout", value=0.004)])
    stall = (emulator.elapsed_s + 0.3, emulator.elapsed_s + 0.3 + STALL_S)
    emulator.injector = DxlFaultInjector(DxlFaults(stall_servo_id=13, stall_window_s=stall))
    probe = Node("probe", context=ros_context)
    trips: list = []
    probe.create_subscription(DiagnosticArray, "/diagnostics", lambda a: trips.extend(
        s for s in a.status if s.name == "/follower/arm_driver: trip"), 50)
    reboot = probe.create_client(Trigger, "/follower/arm_driver/reboot")
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(follower)
    executor.add_node(probe)
    spin = lambda: executor.spin_once(timeout_sec=0.01)  # noqa: E731
    try:
        assert wait_for(lambda: trips and trips[-1].level == b"\x02", 10.0, spin)
        trip = trips[-1]
        assert "servo 13 (joint3): no valid reply" in trip.message
        assert trip.message.endswith("; call /follower/arm_driver/reboot")
        values = {kv.key: kv.value for kv in trip.values}
        assert values["reason"].startswith("servo 13 (joint3): no valid reply")
        assert values["reboot_service"] == "/follower/arm_driver/reboot"
        assert wait_for(lambda: emulator.elapsed_s > stall[1] + 0.1, 10.0, spin)
        future = reboot.call_async(Trigger.Request())
        assert wait_for(future.done, 5.0, spin) and future.result().success, future.result()
        assert all(r.get("torque_enable") == 1 for r in servos)
        assert wait_for(lambda: trips[-1].level == b"\x00", 3.0, spin)
        assert trips[-1].message == "not tripped"
    finally:
        follower.close()
        probe.destroy_node()
