"""ROS 2 node of the force/torque sensor (ATI Net F/T over UDP, or the serial line sensor).

A reader thread receives readings, checks them (:class:`na_driver.ft_core.FtProcessor`) and
publishes ``wrench`` (geometry_msgs/WrenchStamped, sensor frame, tared); the executor serves
``~/tare`` and the 1 Hz ``/diagnostics``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from std_srvs.srv import Trigger

from na_common import topics
from na_common.ros_node import declare_and_read, diagnostic_array, diagnostic_status, run_node, stamp_at, usage
from na_common.stamps import IncreasingStamps
from na_driver.ft_core import FtConfigError, WrenchSample, build_ft_config, default_ft_parameters
from na_driver.ft_driver_core import FtDriverCore
from na_driver.ft_sources import FtSourceError

PARAMETER_DESCRIPTIONS = {
    "backend": "netft (ATI Net F/T RDT over UDP) or serial (ASCII lines '< fx fy fz mx my mz >' in mN)",
    "address": "Net F/T IP address",
    "port": "Net F/T RDT UDP port",
    "device": "serial device of the line sensor",
    "baud_rate": "serial baud rate (8N1)",
    "counts_per_force": "counts per N (Net F/T calibration 'calcpf'; serial: 1000 for mN); 0 = backend default",
    "counts_per_torque": "counts per N·m (Net F/T 'calcpt'; serial: 1000 for mN·m); 0 = backend default",
    "publish_rate": "Hz; readings are averaged down to this rate; 0 publishes every reading",
    "frame_id": "header frame_id (the sensor frame)",
    "axis_permutation": "output axis i takes input axis axis_permutation[i] (Fx Fy Fz Tx Ty Tz order)",
    "axis_signs": "sign per output axis (+1/-1), applied after the permutation",
    "tare_duration": "s averaged by ~/tare (and tare_on_start)",
    "tare_on_start": "tare once at start-up (the sensor must be unloaded)",
    "stale_timeout": "s without a good reading before diagnostics report stale data",
    "port_wait": "serial: s to wait at start-up for the device to appear (0 = fail at once)",
}
_READ_TIMEOUT_S = 0.05
# SCHED_FIFO priority of the reader thread, as the arm drivers' bus loops run (50; needs CAP_SYS_NICE, else normal
# scheduling): at normal priority a busy 2-core host left the 500 Hz Net F/T stream at 235-350 Hz.
_READER_PRIORITY = 50


class FtDriverNode(Node):
    def __init__(self, **node_kwargs) -> None:
        super().__init__("ft_driver", **node_kwargs)
        params = declare_and_read(self, default_ft_parameters(), PARAMETER_DESCRIPTIONS, typed=False)
        self.config = build_ft_config(params)
        self.core = FtDriverCore(self.config)
        self.core.open(self.get_logger().info)
        self._pub = self.create_publisher(WrenchStamped, topics.WRENCH, 50)
        self._diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.create_service(Trigger, "~/tare", self._on_tare)
        self.create_timer(1.0, self._publish_diagnostics)
        self._stamp_order = IncreasingStamps()          # the reader thread's stamps
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, name="ft-reader", daemon=True)
        self._thread.start()
        if self.config.tare_on_start:
            self._tare_now()

    # ---- reader thread ----------------------------------------------------------------------
    def _read_loop(self) -> None:
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(_READER_PRIORITY))     # this thread only
        while not self._stop.is_set():
            failing = self.core.read_error is not None
            try:
                sample = self.core.poll(_READ_TIMEOUT_S)
            except FtSourceError as exc:
                if not failing:
                    self.get_logger().error(str(exc))
                self._stop.wait(0.5)
                continue
            if sample is None:
                continue
            try:
                self._pub.publish(self._to_msg(sample))
            except Exception:   # rclpy raises RCLError once a signal has shut the context down
                if not self.context.ok():
                    return      # SIGINT/SIGTERM: close() ends this thread; not an error
                raise

    def _to_msg(self, sample: WrenchSample) -> WrenchStamped:
        msg = WrenchStamped()
        msg.header.stamp = stamp_at(self, sample.stamp, self._stamp_order)
        msg.header.frame_id = self.config.frame_id
        w = sample.wrench
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = float(w[0]), float(w[1]), float(w[2])
        msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = float(w[3]), float(w[4]), float(w[5])
        return msg

    # ---- tare ------------------------------------------------------------------------------------
    def _tare_now(self) -> str:
        return "tared: offset " + " ".join(f"{v:.4f}" for v in self.core.tare())

    def _on_tare(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            response.message = self._tare_now()
            response.success = True
        except (FtSourceError, TimeoutError) as exc:
            response.success = False
            response.message = f"tare failed: {exc or 'no good readings during the tare window'}"
        if response.success:
            self.get_logger().info(response.message)
        else:
            self.get_logger().error(response.message)
        return response

    # ---- diagnostics -----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        name = self.core.source.name
        status = diagnostic_status(f"{self.get_fully_qualified_name()}: {name}", name, *self.core.status(),
                                   self.core.diagnostic_values())
        self._diag_pub.publish(diagnostic_array(self, [status]))

    def close(self) -> None:
        """Stop reading, stop streaming (Net F/T), close the socket/device, destroy the node."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        self.core.close()
        self.destroy_node()


HELP_SUMMARY = ("Force/torque sensor driver (ATI Net F/T RDT over UDP, or serial lines in mN): publishes wrench\n"
                "(geometry_msgs/WrenchStamped), service ~/tare (Trigger), /diagnostics. Parameter files:\n"
                "config/ft_netft.yaml, config/ft_serial.yaml.")


def _start_node() -> FtDriverNode:
    try:
        return FtDriverNode()
    except TimeoutError:
        raise FtSourceError("start-up tare got no good readings") from None


def main(argv: list[str] | None = None) -> int:
    return run_node("ft_driver",
                    lambda: usage("ft_driver", HELP_SUMMARY, default_ft_parameters(), PARAMETER_DESCRIPTIONS),
                    _start_node, startup_errors=(FtConfigError, FtSourceError), argv=argv)


if __name__ == "__main__":
    sys.exit(main())
