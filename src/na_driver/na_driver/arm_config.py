"""Arm driver configuration: robot facts from the robot spec, per-rig settings from parameters,
validation with clear errors (ROS-free).

Servo IDs, joint names, homing offsets, drive directions, the gripper map and the joint limits are
robot facts: they come from the robot spec (``na_description``; parameter ``robot_spec`` names another
spec YAML) and are not driver parameters. The parameters are what a rig tunes: port, baud rate, loop
rate, gains, current limit, thresholds and timeouts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from na_description import RobotSpec, load_spec, xm430  # xm430: the Bus Watchdog (XM430 only)
from na_description.spec import SpecError
from na_driver.servo_family import ServoFamily, family_of

ROLES = ("leader", "follower")
# Former driver parameters that are robot facts now; a parameter file that still sets one is refused.
ROBOT_FACTS = ("servo_ids", "joint_names", "homing_offsets", "drive_directions", "gripper_angle_points",
               "gripper_slide_points")


class ConfigError(ValueError):
    """A driver parameter is missing, of the wrong type or out of range; the message names it."""


@dataclass(frozen=True)
class ArmConfig:
    """Everything the arm driver core needs. Per-joint lists are in servo (robot spec) order."""

    port: str
    role: str
    baud_rate: int
    operating_mode: int
    loop_rate: float                       # Hz
    position_p_gain: tuple[int, ...]
    position_i_gain: tuple[int, ...]
    position_d_gain: tuple[int, ...]
    current_limit: tuple[float, ...]       # A
    return_delay_us: int                   # us, even (2 us units)
    temperature_warning: float             # degC
    temperature_trip: float                # degC
    error_timeout: float                   # s without a valid reply before a servo is reported failed
    bus_retries: int
    reply_timeout: float                   # s, 0 = derived from the baud rate
    reopen_interval: float                 # s between attempts to reopen a lost port
    port_wait: float                       # s to wait at start-up for the port to appear
    frame_id: str
    robot_spec: RobotSpec                  # IDs, names, homing, directions, gripper map, limits, servo model
    bus_watchdog_ms: float = 100.0         # follower: servos stop on their own this long after the host's last packet
    thread_priority: int = 50              # SCHED_FIFO priority of the bus loop thread, 0 = normal scheduling

    @property
    def period(self) -> float:
        return 1.0 / self.loop_rate

    @property
    def is_follower(self) -> bool:
        return self.role == "follower"

    @property
    def family(self) -> ServoFamily:
        return family_of(self.robot_spec)

    @property
    def servo_ids(self) -> tuple[int, ...]:
        return tuple(self.robot_spec.servo_ids)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self.robot_spec.joint_names)

    @property
    def n_servos(self) -> int:
        return self.robot_spec.n_motors

    @property
    def gripper_index(self) -> int | None:
        for k, joint in enumerate(self.robot_spec.joints):
            if joint.type == "gripper":
                return k
        return None


def default_parameters(spec: RobotSpec | None = None) -> dict[str, Any]:
    """Parameter defaults (the node declares exactly these). Port and role have no default.

    The servo family's defaults where the families differ: XM430 extended position mode (the authors'
    setting), Current Limit at its maximum and a 100 ms Bus Watchdog; STS3215 position mode (LeRobot's),
    the factory Protection Current and no watchdog (the servo has none).
    """
    spec = spec or load_spec()
    family = _family(spec)
    n = spec.n_motors
    gains = spec.position_gains
    return {
        "port": "",
        "role": "",
        "robot_spec": "",                        # "" = the spec shipped with na_description
        "baud_rate": spec.baud_rate,
        "operating_mode": family.default_operating_mode,
        "loop_rate": 100.0,                      # Hz, the authors' recording rate (docs/REFERENCES.md, Authors' setup)
        "position_p_gain": [gains["p"]] * n,      # the spec's (docs/REFERENCES.md, OpenManipulator-X; SO-101)
        "position_i_gain": [gains["i"]] * n,
        "position_d_gain": [gains["d"]] * n,
        "current_limit": [round(family.default_current_limit_a, 3)] * n,
        "return_delay_us": 0,                    # docs/REFERENCES.md, XM430-W350: 0 instead of the 500 us default
        "temperature_warning": 55.0,             # degC, authors' rig (docs/REFERENCES.md, Authors' setup)
        "temperature_trip": 60.0,                # degC, authors' rig (docs/REFERENCES.md, Authors' setup)
        "error_timeout": 0.5,
        "bus_retries": 2,
        "reply_timeout": 0.0,
        "reopen_interval": 1.0,
        "port_wait": 15.0,                       # s; a launch may start the driver before its port exists
        "frame_id": spec.base_frame,
        "bus_watchdog_ms": 100.0 if family.bus_watchdog else 0.0,   # XM430: 5 units of 20 ms; 0 = off (e-manual)
        "thread_priority": 50,                   # like ros2_control's update thread; 0 = normal scheduling
    }


def load_robot_spec(path: Any) -> RobotSpec:
    """The spec named by parameter ``robot_spec`` ("" = the shipped one); a bad one is a :class:`ConfigError`."""
    try:
        return load_spec(str(path).strip() or None)
    except (SpecError, OSError) as exc:
        raise ConfigError(f"parameter 'robot_spec': {exc}") from exc


def _family(spec: RobotSpec) -> ServoFamily:
    try:
        return family_of(spec)
    except ValueError as exc:
        raise ConfigError(f"parameter 'robot_spec': {exc}") from exc


def reject_robot_facts(names: Sequence[str]) -> None:
    """Refuse former parameters that are robot facts now (an old parameter file would set them)."""
    facts = [name for name in names if name in ROBOT_FACTS]
    if facts:
        raise ConfigError(f"parameter(s) {', '.join(facts)} are robot facts, taken from the robot spec: remove "
                          f"them from the parameter file (another arm: a spec YAML in parameter robot_spec)")


def _as_list(name: str, value: Any, n: int, kind: type) -> list:
    """A per-joint parameter: a scalar is broadcast, a list must have ``n`` entries."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        value = [value] * n
    if len(value) != n:
        raise ConfigError(f"parameter '{name}' needs {n} values (one per servo), got {len(value)}")
    try:
        return [kind(v) for v in value]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"parameter '{name}': {exc}") from exc


def _operating_mode(value: Any, family: ServoFamily) -> int:
    names = {name: code for code, name in family.operating_modes.items()}
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and value in family.operating_modes:
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise ConfigError(f"parameter 'operating_mode' must be one of {sorted(names)} (or its number) for "
                      f"{family.name} servos, got {value!r}")


def build_config(params: Mapping[str, Any]) -> ArmConfig:
    """Merge ``params`` over the defaults and validate; raises :class:`ConfigError` naming the parameter."""
    spec = load_robot_spec(params.get("robot_spec", ""))
    family = _family(spec)
    defaults = default_parameters(spec)
    unknown = sorted(set(params) - set(defaults))
    reject_robot_facts(unknown)
    if unknown:
        raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
    p = {**defaults, **params}

    port = str(p["port"]).strip()
    if not port:
        raise ConfigError("parameter 'port' is required (e.g. /dev/ttyUSB0, or the emulator's pty path)")
    role = str(p["role"]).strip()
    if role not in ROLES:
        raise ConfigError(f"parameter 'role' must be 'leader' or 'follower', got {role!r}")
    baud = int(p["baud_rate"])
    if baud not in family.baud_rates.values():
        raise ConfigError(f"parameter 'baud_rate' must be one of {sorted(family.baud_rates.values())} for "
                          f"{family.name} servos, got {baud}")

    n = spec.n_motors
    if not all(0 <= i <= family.max_id for i in spec.servo_ids):
        raise ConfigError(f"parameter 'robot_spec': servo IDs must be in 0..{family.max_id}, got {spec.servo_ids}")

    loop_rate = float(p["loop_rate"])
    if not 0.0 < loop_rate <= 1000.0:
        raise ConfigError(f"parameter 'loop_rate' must be in (0, 1000] Hz, got {loop_rate}")

    gains = {}
    for key in ("position_p_gain", "position_i_gain", "position_d_gain"):
        gains[key] = _as_list(key, p[key], n, int)
        if not all(0 <= g <= family.max_gain for g in gains[key]):
            raise ConfigError(f"parameter '{key}' must be in 0..{family.max_gain}, got {gains[key]}")

    current = _as_list("current_limit", p["current_limit"], n, float)
    max_current = family.max_current_limit_a
    if not all(0.0 < c <= max_current + 1e-9 for c in current):
        raise ConfigError(f"parameter 'current_limit' must be in (0, {max_current:.3f}] A, got {current}")

    delay = int(p["return_delay_us"])
    if not 0 <= delay <= family.max_return_delay_us or delay % 2:
        raise ConfigError(f"parameter 'return_delay_us' must be an even number in 0..{family.max_return_delay_us:.0f}, "
                          f"got {delay}")

    warn, trip = float(p["temperature_warning"]), float(p["temperature_trip"])
    temp_limit = family.temperature_limit     # the servo's own shutdown: XM430 80 degC, STS3215 70 degC
    if not warn < trip <= temp_limit:
        raise ConfigError(f"need temperature_warning < temperature_trip <= {temp_limit} degC, got {warn} and {trip}")

    error_timeout = float(p["error_timeout"])
    if not error_timeout > 0:
        raise ConfigError(f"parameter 'error_timeout' must be positive, got {error_timeout}")
    retries = int(p["bus_retries"])
    if not 0 <= retries <= 5:
        raise ConfigError(f"parameter 'bus_retries' must be in 0..5, got {retries}")
    reply_timeout = float(p["reply_timeout"])
    if reply_timeout < 0 or not math.isfinite(reply_timeout):
        raise ConfigError(f"parameter 'reply_timeout' must be >= 0 s (0 = derived from the baud rate), "
                          f"got {reply_timeout}")
    reopen = float(p["reopen_interval"])
    if not reopen > 0:
        raise ConfigError(f"parameter 'reopen_interval' must be positive, got {reopen}")
    port_wait = float(p["port_wait"])
    if not port_wait >= 0:
        raise ConfigError(f"parameter 'port_wait' must be >= 0 s, got {port_wait}")
    watchdog_ms = float(p["bus_watchdog_ms"])
    if watchdog_ms and not family.bus_watchdog:
        raise ConfigError(f"parameter 'bus_watchdog_ms' must be 0: {family.name} servos have no Bus Watchdog, "
                          f"got {watchdog_ms}")
    max_watchdog_ms = xm430.BUS_WATCHDOG_MAX_UNITS * xm430.BUS_WATCHDOG_UNIT_S * 1e3
    unit_ms = xm430.BUS_WATCHDOG_UNIT_S * 1e3
    if not (watchdog_ms == 0 or unit_ms <= watchdog_ms <= max_watchdog_ms):
        raise ConfigError(f"parameter 'bus_watchdog_ms' must be 0 (off) or in {unit_ms:.0f}..{max_watchdog_ms:.0f} ms, "
                          f"got {watchdog_ms}")
    priority = int(p["thread_priority"])
    if not 0 <= priority <= 99:
        raise ConfigError(f"parameter 'thread_priority' must be 0 (normal scheduling) or 1..99 (SCHED_FIFO), "
                          f"got {priority}")

    return ArmConfig(
        port=port, role=role, baud_rate=baud, operating_mode=_operating_mode(p["operating_mode"], family),
        loop_rate=loop_rate,
        position_p_gain=tuple(gains["position_p_gain"]), position_i_gain=tuple(gains["position_i_gain"]),
        position_d_gain=tuple(gains["position_d_gain"]), current_limit=tuple(current), return_delay_us=delay,
        temperature_warning=warn, temperature_trip=trip, error_timeout=error_timeout, bus_retries=retries,
        reply_timeout=reply_timeout, reopen_interval=reopen, port_wait=port_wait, frame_id=str(p["frame_id"]),
        robot_spec=spec, bus_watchdog_ms=watchdog_ms, thread_priority=priority)
