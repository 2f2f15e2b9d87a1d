"""Arm driver configuration: defaults from the robot spec, validation with clear errors (ROS-free)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from na_description import RobotSpec, load_spec, xm430
from na_description.spec import GripperMap

ROLES = ("leader", "follower")
MAX_CURRENT_LIMIT_A = xm430.REGISTERS["current_limit"].maximum * xm430.CURRENT_UNIT_A   # 1193 units, ~3.2 A
MAX_RETURN_DELAY_US = xm430.REGISTERS["return_delay_time"].maximum * xm430.RETURN_DELAY_UNIT_S * 1e6  # 508 us
MAX_GAIN = xm430.REGISTERS["position_p_gain"].maximum


class ConfigError(ValueError):
    """A driver parameter is missing, of the wrong type or out of range; the message names it."""


@dataclass(frozen=True)
class ArmConfig:
    """Everything the arm driver core needs. Per-joint lists are in servo order."""

    port: str
    role: str
    baud_rate: int
    servo_ids: tuple[int, ...]
    joint_names: tuple[str, ...]
    operating_mode: int
    loop_rate: float                       # Hz
    position_p_gain: tuple[int, ...]
    position_i_gain: tuple[int, ...]
    position_d_gain: tuple[int, ...]
    current_limit: tuple[float, ...]       # A
    return_delay_us: int                   # us, even (2 us units)
    homing_offsets: tuple[float, ...]      # rad, joint = direction * servo + offset
    drive_directions: tuple[int, ...]      # +1 / -1
    gripper_angle_points: tuple[float, float]
    gripper_slide_points: tuple[float, float]
    temperature_warning: float             # degC
    temperature_trip: float                # degC
    error_timeout: float                   # s without a valid reply before a servo is reported failed
    bus_retries: int
    reply_timeout: float                   # s, 0 = derived from the baud rate
    reopen_interval: float                 # s between attempts to reopen a lost port
    frame_id: str
    robot_spec: RobotSpec
    bus_watchdog_ms: float = 100.0         # follower: servos stop on their own this long after the host's last packet
    thread_priority: int = 50              # SCHED_FIFO priority of the bus loop thread, 0 = normal scheduling

    @property
    def period(self) -> float:
        return 1.0 / self.loop_rate

    @property
    def is_follower(self) -> bool:
        return self.role == "follower"

    @property
    def n_servos(self) -> int:
        return len(self.servo_ids)

    @property
    def gripper_index(self) -> int | None:
        for k, joint in enumerate(self.robot_spec.joints):
            if joint.type == "gripper":
                return k
        return None

    def joint_spec(self) -> RobotSpec:
        """The robot spec with this driver's IDs, homing offsets, directions and gripper map."""
        joints = tuple(
            dataclasses.replace(j, name=name, servo_id=sid, homing_offset=off, drive_direction=direction)
            for j, name, sid, off, direction in zip(self.robot_spec.joints, self.joint_names, self.servo_ids,
                                                    self.homing_offsets, self.drive_directions, strict=True))
        gripper = GripperMap(self.gripper_angle_points, self.gripper_slide_points)
        return dataclasses.replace(self.robot_spec, joints=joints, gripper=gripper)


def default_parameters(spec: RobotSpec | None = None) -> dict[str, Any]:
    """Parameter defaults (the node declares exactly these). Port and role have no default."""
    spec = spec or load_spec()
    n = spec.n_motors
    gains = spec.position_gains
    return {
        "port": "",
        "role": "",
        "baud_rate": spec.baud_rate,
        "servo_ids": list(spec.servo_ids),
        "joint_names": list(spec.joint_names),
        "operating_mode": "position",
        "loop_rate": 100.0,                      # Hz, the authors' recording rate (FACTS §4)
        "position_p_gain": [gains["p"]] * n,      # ROBOTIS ROS 2 hardware setting (FACTS §1)
        "position_i_gain": [gains["i"]] * n,
        "position_d_gain": [gains["d"]] * n,
        "current_limit": [round(MAX_CURRENT_LIMIT_A, 3)] * n,
        "return_delay_us": 0,                    # FACTS §2: 0 instead of the 500 us default
        "homing_offsets": [j.homing_offset for j in spec.joints],
        "drive_directions": [j.drive_direction for j in spec.joints],
        "gripper_angle_points": list(spec.gripper.angle_points),
        "gripper_slide_points": list(spec.gripper.slide_points),
        "temperature_warning": 55.0,             # degC, authors' rig (FACTS §4)
        "temperature_trip": 60.0,                # degC, authors' rig (FACTS §4)
        "error_timeout": 0.5,
        "bus_retries": 2,
        "reply_timeout": 0.0,
        "reopen_interval": 1.0,
        "frame_id": spec.base_frame,
        "bus_watchdog_ms": 100.0,                # 5 units of 20 ms; 0 = off (e-manual, Bus Watchdog)
        "thread_priority": 50,                   # like ros2_control's update thread; 0 = normal scheduling
    }


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


def _operating_mode(value: Any) -> int:
    names = {name: code for code, name in xm430.OPERATING_MODES.items()}
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and value in xm430.OPERATING_MODES:
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise ConfigError(f"parameter 'operating_mode' must be one of {sorted(names)} (or its number), got {value!r}")


def build_config(params: Mapping[str, Any], spec: RobotSpec | None = None) -> ArmConfig:
    """Merge ``params`` over the defaults and validate; raises :class:`ConfigError` naming the parameter."""
    spec = spec or load_spec()
    defaults = default_parameters(spec)
    unknown = sorted(set(params) - set(defaults))
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
    if baud not in xm430.BAUD_RATES.values():
        raise ConfigError(f"parameter 'baud_rate' must be one of {sorted(xm430.BAUD_RATES.values())}, got {baud}")

    n = spec.n_motors
    ids = _as_list("servo_ids", p["servo_ids"], n, int)
    if len(set(ids)) != n or not all(0 <= i <= xm430.REGISTERS["id"].maximum for i in ids):
        raise ConfigError(f"parameter 'servo_ids' must be {n} distinct IDs in 0..252, got {ids}")
    names = _as_list("joint_names", p["joint_names"], n, str)
    if len(set(names)) != n:
        raise ConfigError(f"parameter 'joint_names' must be distinct, got {names}")

    loop_rate = float(p["loop_rate"])
    if not 0.0 < loop_rate <= 1000.0:
        raise ConfigError(f"parameter 'loop_rate' must be in (0, 1000] Hz, got {loop_rate}")

    gains = {}
    for key in ("position_p_gain", "position_i_gain", "position_d_gain"):
        gains[key] = _as_list(key, p[key], n, int)
        if not all(0 <= g <= MAX_GAIN for g in gains[key]):
            raise ConfigError(f"parameter '{key}' must be in 0..{MAX_GAIN}, got {gains[key]}")

    current = _as_list("current_limit", p["current_limit"], n, float)
    if not all(0.0 < c <= MAX_CURRENT_LIMIT_A + 1e-9 for c in current):
        raise ConfigError(f"parameter 'current_limit' must be in (0, {MAX_CURRENT_LIMIT_A:.3f}] A, got {current}")

    delay = int(p["return_delay_us"])
    if not 0 <= delay <= MAX_RETURN_DELAY_US or delay % 2:
        raise ConfigError(f"parameter 'return_delay_us' must be an even number in 0..{MAX_RETURN_DELAY_US:.0f}, "
                          f"got {delay}")

    offsets = _as_list("homing_offsets", p["homing_offsets"], n, float)
    directions = _as_list("drive_directions", p["drive_directions"], n, int)
    if not all(d in (1, -1) for d in directions):
        raise ConfigError(f"parameter 'drive_directions' entries must be 1 or -1, got {directions}")
    angle_points = _as_list("gripper_angle_points", p["gripper_angle_points"], 2, float)
    slide_points = _as_list("gripper_slide_points", p["gripper_slide_points"], 2, float)
    if angle_points[0] == angle_points[1]:
        raise ConfigError("parameter 'gripper_angle_points' needs two different angles")

    warn, trip = float(p["temperature_warning"]), float(p["temperature_trip"])
    temp_limit = xm430.REGISTERS["temperature_limit"].default     # the servo's own shutdown, 80 degC
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
    watchdog_ms = float(p["bus_watchdog_ms"])
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
        port=port, role=role, baud_rate=baud, servo_ids=tuple(ids), joint_names=tuple(names),
        operating_mode=_operating_mode(p["operating_mode"]), loop_rate=loop_rate,
        position_p_gain=tuple(gains["position_p_gain"]), position_i_gain=tuple(gains["position_i_gain"]),
        position_d_gain=tuple(gains["position_d_gain"]), current_limit=tuple(current), return_delay_us=delay,
        homing_offsets=tuple(offsets), drive_directions=tuple(directions),
        gripper_angle_points=(angle_points[0], angle_points[1]),
        gripper_slide_points=(slide_points[0], slide_points[1]),
        temperature_warning=warn, temperature_trip=trip, error_timeout=error_timeout, bus_retries=retries,
        reply_timeout=reply_timeout, reopen_interval=reopen, frame_id=str(p["frame_id"]), robot_spec=spec,
        bus_watchdog_ms=watchdog_ms, thread_priority=priority)
