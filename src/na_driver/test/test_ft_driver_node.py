"""F/T driver node in-process (private rclpy context, real DDS) against the na_sim F/T emulators."""

from __future__ import annotations

import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from na_driver.ft_driver_node import FtDriverNode
from na_sim.faults import FtFaults
from na_sim.ft_emulator import FtErrorModel, NetFtEmulator, SerialFtEmulator

TRUE_WRENCH = np.array([0.5, 1.0, -4.0, 0.02, -0.03, 0.01])
NOISE = FtErrorModel(force_noise_n=0.01, torque_noise_nm=0.0005, initial_offset_force_n=0.8,
                     initial_offset_torque_nm=0.01, drift_force_n_per_sqrt_s=0.0, drift_torque_nm_per_sqrt_s=0.0,
                     seed=4)


def as_array(msg: WrenchStamped) -> np.ndarray:
    f, t = msg.wrench.force, msg.wrench.torque
    return np.array([f.x, f.y, f.z, t.x, t.y, t.z])


def stamp_s(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


@pytest.mark.node
def test_netft_node_publishes_in_order_counts_faults_and_tares(ros_graph) -> None:
    faults = FtFaults(drop_rate=0.03, reorder_rate=0.03, error_status_rate=0.01, seed=2)
    with NetFtEmulator(lambda: TRUE_WRENCH, rate_hz=500.0, error_model=NOISE, faults=faults) as emulator:
        node = ros_graph.add(FtDriverNode(context=ros_graph.context, namespace="ft", parameter_overrides=[
            Parameter("backend", value="netft"), Parameter("address", value="127.0.0.1"),
            Parameter("port", value=emulator.port), Parameter("tare_duration", value=0.2)]))
        probe = ros_graph.probe()
        wrenches: list[WrenchStamped] = []
        diagnostics: list[DiagnosticArray] = []
        probe.create_subscription(WrenchStamped, "/ft/wrench", wrenches.append, 1000)
        probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
        tare = probe.create_client(Trigger, "/ft/ft_driver/tare")
        wait_for = ros_graph.wait_for
        assert wait_for(lambda: len(wrenches) >= 200, 5.0)
        assert wrenches[0].header.frame_id == "ft_sensor"
        before = np.mean([as_array(m) for m in wrenches], axis=0)
        np.testing.assert_allclose(before, TRUE_WRENCH + emulator.measured.offset, atol=0.01)
        stamps = [stamp_s(m) for m in wrenches]
        assert stamps == sorted(stamps)                     # never out of order
        counters = node.core.processor.counters
        assert counters.reordered > 0 and counters.lost > 0

        # The tare service call blocks the node's executor for the tare window, so spin it from here.
        response = ros_graph.call(tare, Trigger.Request(), 5.0)
        assert response.success, response
        tared_at = time.time()      # messages still queued from before the tare are older than this
        assert wait_for(lambda: sum(stamp_s(m) > tared_at for m in wrenches) >= 200, 5.0)
        after = np.mean([as_array(m) for m in wrenches if stamp_s(m) > tared_at], axis=0)
        np.testing.assert_allclose(after, np.zeros(6), atol=0.01)

        def counted(status) -> dict[str, str]:
            return {kv.key: kv.value for kv in status.values}

        def all_faults_counted() -> bool:
            # the emulator's faults are random: wait (once-a-second diagnostics) until each kind has happened
            latest = [s for d in diagnostics for s in d.status if s.values]
            return bool(latest) and all(int(counted(latest[-1]).get(key, 0)) > 0
                                        for key in ("lost", "reordered", "error_status"))

        assert wait_for(all_faults_counted, 10.0), [counted(s) for d in diagnostics for s in d.status]
        status = [s for d in diagnostics for s in d.status if s.values][-1]
        assert status.level == DiagnosticStatus.WARN and "lost" in status.message
        ros_graph.close(node)
        assert wait_for(lambda: not emulator.streaming, 2.0)        # the driver stopped the stream


@pytest.mark.node
def test_serial_node_publishes_the_sensor_wrench(ros_graph) -> None:
    with SerialFtEmulator(lambda: TRUE_WRENCH, rate_hz=200.0, error_model=NOISE) as emulator:
        node = ros_graph.add(FtDriverNode(context=ros_graph.context, namespace="ft", parameter_overrides=[
            Parameter("backend", value="serial"), Parameter("device", value=emulator.port_path),
            Parameter("axis_signs", value=[-1.0, 1.0, 1.0, 1.0, 1.0, 1.0])]))
        wrenches: list[WrenchStamped] = []
        ros_graph.probe().create_subscription(WrenchStamped, "/ft/wrench", wrenches.append, 1000)
        assert ros_graph.wait_for(lambda: len(wrenches) >= 100, 5.0)
        ros_graph.close(node)
        expected = (TRUE_WRENCH + emulator.measured.offset) * np.array([-1, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(np.mean([as_array(m) for m in wrenches], axis=0), expected, atol=0.01)
