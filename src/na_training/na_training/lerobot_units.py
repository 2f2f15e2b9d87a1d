"""LeRobot's motor units <-> the suite's SI units, LeRobot calibration files, and unit inference.

LeRobot normalises a Present/Goal Position read in encoder steps (``motors_bus.py`` ``_normalize``, with the
calibration's ``range_min``/``range_max`` after homing and ``drive_mode``):

* ``degrees`` (``MotorNormMode.DEGREES``, ``use_degrees``): ``(steps - (range_min + range_max) / 2) * 360 / 4095``
  (4095 = resolution - 1, LeRobot's formula; a LeRobot "degree" is 4096/4095 of a true degree), not clamped;
* ``range`` (``RANGE_M100_100``): ``(steps - range_min) / (range_max - range_min) * 200 - 100``, negated with
  ``drive_mode``, clamped to the range;
* the gripper always ``RANGE_0_100``: ``(steps - range_min) / (range_max - range_min) * 100`` (``100 - x`` with
  ``drive_mode``).

The suite's angle: ``servo = (steps - 2048) * 2 pi / 4096`` (``na_description`` servo tables), joint =
``spec.servo_to_joint(servo)``. LeRobot's calibration centres each range on the pose the arm was calibrated in,
which the SO-101 spec takes as joint zero; without a calibration the middle is taken as 2048 and the gripper's
0..100 as a share of the spec's jaw limits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from na_description import RobotSpec
from na_description.servo_tables import servo_table
from na_training.lerobot_robots import CALIBRATION_FOLDERS

JOINT_UNITS = ("degrees", "range", "steps")
RANGE_LIMIT = 100.0                     # |value| of range mode (clamped by LeRobot)
GRIPPER_SLACK = 1.0                     # a 0..100 gripper value may overshoot this much (rounding, float32)


class LeRobotUnitsError(ValueError):
    """Values whose units cannot be told or converted; the message names what is ambiguous or missing."""


# ----------------------------------------------------------------------------------------- calibration

@dataclass(frozen=True)
class MotorRange:
    """One motor of a LeRobot calibration file: the calibrated range (steps after homing) and drive mode."""

    range_min: float
    range_max: float
    drive_mode: int = 0
    homing_offset: int | None = None


@dataclass
class Calibration:
    path: Path
    motors: dict[str, MotorRange]                       # by spec joint name
    warnings: list[str] = field(default_factory=list)   # e.g. overflowed homing offsets


def default_calibration_root() -> Path:
    """LeRobot's calibration folder: ``$HF_LEROBOT_CALIBRATION``, else ``$HF_LEROBOT_HOME/calibration``, else
    ``$HF_HOME/lerobot/calibration`` (``HF_HOME`` default ``~/.cache/huggingface``; ``lerobot/utils/constants.py``)."""
    if os.environ.get("HF_LEROBOT_CALIBRATION"):
        return Path(os.environ["HF_LEROBOT_CALIBRATION"]).expanduser()
    if os.environ.get("HF_LEROBOT_HOME"):
        return Path(os.environ["HF_LEROBOT_HOME"]).expanduser() / "calibration"
    hf_home = Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser()
    return hf_home / "lerobot" / "calibration"


def find_calibration(robot_id: str, spec: RobotSpec, root: str | Path | None = None) -> Path:
    """``<root>/robots/<folder>/<robot_id>.json`` for the robot's LeRobot folders (``so_follower``, older
    ``so101_follower`` / ``so100_follower``), then ``<root>/<folder>/<robot_id>.json`` and ``<root>/<robot_id>.json``:
    the first that exists."""
    base = Path(root).expanduser() if root is not None else default_calibration_root()
    folders = CALIBRATION_FOLDERS.get(spec.name, ())
    tried = [base / "robots" / folder / f"{robot_id}.json" for folder in folders]
    tried += [base / folder / f"{robot_id}.json" for folder in folders] + [base / f"{robot_id}.json"]
    for path in tried:
        if path.is_file():
            return path
    raise LeRobotUnitsError(f"no LeRobot calibration for robot id {robot_id!r}: tried "
                            f"{', '.join(str(p) for p in tried)}")


def load_calibration(spec: RobotSpec, path: str | Path | None, robot_id: str | None,
                     folder: str | Path | None) -> Calibration | None:
    """The calibration the command line names: a file, or a robot id in LeRobot's calibration folder (``folder``,
    or ``path`` when that is a folder); None when it names none."""
    if path is not None and Path(path).expanduser().is_dir():
        if robot_id is None:
            raise LeRobotUnitsError(f"calibration {path} is a folder: give the robot id (--robot-id) to find the "
                                    "file in it")
        folder, path = path, None
    if path is not None:
        return read_calibration(Path(path).expanduser(), spec)
    if robot_id is not None:
        return read_calibration(find_calibration(robot_id, spec, folder), spec)
    return None


def read_calibration(path: str | Path, spec: RobotSpec) -> Calibration:
    """A LeRobot calibration JSON (``{motor: {id, drive_mode, homing_offset, range_min, range_max}}``), motors
    matched to the spec's joints by name (``main_`` prefixes and any order allowed). Homing offsets beyond the
    servo's Homing Offset register are named in ``warnings`` (they overflowed when written)."""
    from na_training.lerobot_names import match_motor_names

    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise LeRobotUnitsError(f"calibration {path}: cannot read ({err})") from None
    if not isinstance(raw, dict):
        raise LeRobotUnitsError(f"calibration {path}: expected an object keyed by motor name")
    try:
        order = match_motor_names(list(raw), spec, f"calibration {path}")
    except ValueError as err:
        raise LeRobotUnitsError(str(err)) from None
    keys = list(raw)
    register = servo_table(spec).REGISTERS["homing_offset"]
    calibration = Calibration(path=path, motors={})
    for joint, k in zip(spec.joint_names, order, strict=True):
        entry = raw[keys[k]]
        try:
            offset = entry.get("homing_offset")
            motor = MotorRange(float(entry["range_min"]), float(entry["range_max"]), int(entry.get("drive_mode", 0)),
                               None if offset is None else int(offset))
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise LeRobotUnitsError(f"calibration {path}: motor {keys[k]}: needs range_min, range_max "
                                    f"({err})") from None
        if motor.range_max <= motor.range_min:
            raise LeRobotUnitsError(f"calibration {path}: motor {keys[k]}: range_max must exceed range_min")
        if motor.homing_offset is not None and not register.minimum <= motor.homing_offset <= register.maximum:
            calibration.warnings.append(
                f"calibration {path.name}: motor {joint} homing_offset {motor.homing_offset} is outside the "
                f"{spec.servo_model} Homing Offset register ({register.minimum}..{register.maximum}): an overflowed "
                "offset (lerobot#3193, #3348) the servo could not hold; positions are converted with the file's "
                "range_min/range_max, which LeRobot recorded in the frame the servo really used")
        calibration.motors[joint] = motor
    return calibration


# ----------------------------------------------------------------------------------------- positions

def _resolution(spec: RobotSpec) -> int:
    table = servo_table(spec)
    return int(getattr(table, "STEPS_PER_REV", None) or table.PULSES_PER_REV)


def joint_to_steps(angles: np.ndarray, spec: RobotSpec) -> np.ndarray:
    """Joint-side angles ``[T, n]`` (gripper: servo angle) -> encoder steps, unrounded (inverse of the servo
    table's steps -> rad)."""
    table = servo_table(spec)
    return spec.joint_to_servo(angles) * (_resolution(spec) / (2.0 * np.pi)) + table.POSITION_CENTER


def steps_to_joint(steps: np.ndarray, spec: RobotSpec) -> np.ndarray:
    """Encoder steps ``[T, n]`` -> joint-side angles through the servo table and the spec."""
    table = servo_table(spec)
    to_rad = getattr(table, "steps_to_rad", None) or table.pulses_to_rad
    return spec.servo_to_joint(to_rad(steps))


def _gripper_share_to_joint(share: np.ndarray, spec: RobotSpec) -> np.ndarray:
    joint = spec.joints[spec.n_motors - 1]
    return spec.gripper.slide_to_angle(joint.lower + share / 100.0 * (joint.upper - joint.lower))


def _gripper_joint_to_share(angle: np.ndarray, spec: RobotSpec) -> np.ndarray:
    joint = spec.joints[spec.n_motors - 1]
    return (spec.gripper.angle_to_slide(angle) - joint.lower) / (joint.upper - joint.lower) * 100.0


def to_joint_positions(values: np.ndarray, spec: RobotSpec, units: str,
                       calibration: Calibration | None) -> np.ndarray:
    """LeRobot positions ``[T, n]`` (spec order) -> joint-side angles (rad; gripper: servo angle)."""
    values = np.asarray(values, dtype=np.float64)
    if units not in JOINT_UNITS:
        raise LeRobotUnitsError(f"unknown joint units {units!r} (choose from {', '.join(JOINT_UNITS)})")
    if units == "range" and calibration is None:
        raise LeRobotUnitsError("joint values in LeRobot's -100..100 range mode cannot be converted to radians "
                                "without the arm's calibration file (--calibration FILE or --robot-id ID)")
    if units == "steps":
        return steps_to_joint(values, spec)
    center = servo_table(spec).POSITION_CENTER
    steps = np.empty_like(values)
    gripper = spec.n_motors - 1
    for k, joint in enumerate(spec.joints):
        v = values[:, k]
        motor = calibration.motors[joint.name] if calibration is not None else None
        low, high = (motor.range_min, motor.range_max) if motor else (0.0, 0.0)
        if k == gripper:
            share = (100.0 - v if motor and motor.drive_mode else v) / 100.0
            steps[:, k] = low + share * (high - low) if motor else np.nan
        elif units == "degrees":
            steps[:, k] = v * (_resolution(spec) - 1) / 360.0 + ((low + high) / 2.0 if motor else center)
        else:
            share = ((-v if motor.drive_mode else v) + 100.0) / 200.0
            steps[:, k] = low + share * (high - low)
    angles = steps_to_joint(steps, spec)
    if calibration is None:
        angles[:, gripper] = _gripper_share_to_joint(values[:, gripper], spec)
    return angles


def to_lerobot_positions(angles: np.ndarray, spec: RobotSpec, units: str,
                         calibration: Calibration | None) -> np.ndarray:
    """Joint-side angles ``[T, n]`` -> LeRobot positions (the inverse of :func:`to_joint_positions`; not clamped,
    so the round trip is exact)."""
    angles = np.asarray(angles, dtype=np.float64)
    if units not in JOINT_UNITS:
        raise LeRobotUnitsError(f"unknown joint units {units!r} (choose from {', '.join(JOINT_UNITS)})")
    if units == "range" and calibration is None:
        raise LeRobotUnitsError("LeRobot's -100..100 range mode needs the arm's calibration file")
    steps = joint_to_steps(angles, spec)
    if units == "steps":
        return steps
    center = servo_table(spec).POSITION_CENTER
    values = np.empty_like(steps)
    gripper = spec.n_motors - 1
    for k, joint in enumerate(spec.joints):
        s = steps[:, k]
        motor = calibration.motors[joint.name] if calibration is not None else None
        if k == gripper:
            if motor is None:
                values[:, k] = _gripper_joint_to_share(angles[:, k], spec)
                continue
            share = (s - motor.range_min) / (motor.range_max - motor.range_min) * 100.0
            values[:, k] = 100.0 - share if motor.drive_mode else share
        elif units == "degrees":
            middle = (motor.range_min + motor.range_max) / 2.0 if motor else center
            values[:, k] = (s - middle) * 360.0 / (_resolution(spec) - 1)
        else:
            norm = (s - motor.range_min) / (motor.range_max - motor.range_min) * 200.0 - 100.0
            values[:, k] = -norm if motor.drive_mode else norm
    return values


MIN_DISTINCT = 20           # distinct readings a motor needs before the grid its values lie on says anything
GRID_TOLERANCE = 0.02       # of one encoder step (float32 storage moves a value by about 1e-4 of a step)


def _distinct(values: np.ndarray, limit: int = 400) -> np.ndarray | None:
    distinct = np.unique(values[np.isfinite(values)])
    if distinct.size < MIN_DISTINCT:
        return None
    return distinct[np.linspace(0, distinct.size - 1, min(limit, distinct.size)).astype(int)]


def _on_degree_grid(values: np.ndarray, resolution: int) -> bool | None:
    """Whether readings lie on LeRobot's degree grid: whole steps about a whole or half-step middle, x 360/4095."""
    distinct = _distinct(values)
    if distinct is None:
        return None
    half_steps = distinct * (resolution - 1) / 360.0 * 2.0
    return bool(np.max(np.abs(half_steps - np.rint(half_steps))) < 2.0 * GRID_TOLERANCE)


def _range_grid(values: np.ndarray, resolution: int) -> int | None:
    """The smallest calibrated span R (steps) whose -100..100 grid ``(steps - min) / R * 200 - 100`` holds every
    reading, or None."""
    distinct = _distinct(values)
    if distinct is None or np.abs(distinct).max() > RANGE_LIMIT + 1e-3:
        return None
    share = (distinct + RANGE_LIMIT) / (2.0 * RANGE_LIMIT)
    spans = np.arange(16, resolution)
    scaled = share[:, None] * spans[None, :]
    fits = spans[np.max(np.abs(scaled - np.rint(scaled)), axis=0) < GRID_TOLERANCE]
    return int(fits[0]) if fits.size else None


def _grid_units(state: np.ndarray, spec: RobotSpec, motors: Sequence[str]) -> tuple[str, str] | None:
    """Units told by the grid the state readings lie on (raw reads are whole encoder steps, normalised): degrees
    when every arm motor with enough distinct readings is on the degree grid and not every one on a range grid,
    range the other way round; None when the grids do not decide."""
    resolution = _resolution(spec)
    arm = range(spec.n_motors - 1)
    degree = {k: _on_degree_grid(state[:, k], resolution) for k in arm}
    spans = {k: _range_grid(state[:, k], resolution) for k in arm}
    told = [k for k in arm if degree[k] is not None]
    if not told:
        return None
    on_degrees = all(degree[k] for k in told)
    on_range = all(spans[k] is not None for k in told)
    if on_degrees and not on_range:
        return "degrees", (f"the state readings of {', '.join(motors[k] for k in told)} lie on LeRobot's degree grid "
                           "(whole encoder steps x 360/4095) and not on a -100..100 grid")
    if on_range and not on_degrees:
        return "range", ("the state readings lie on -100..100 grids of whole encoder steps ("
                         + ", ".join(f"{motors[k]} {spans[k]} steps" for k in told) + "), not on LeRobot's degree grid")
    return None


def infer_joint_units(state: np.ndarray, spec: RobotSpec, calibration: Calibration | None,
                      motors: Sequence[str]) -> tuple[str, str]:
    """Joint units told from the recorded readings ``state`` ``[N, n]`` (spec order; the readings, not the action,
    which a policy may have sent beyond the range LeRobot clamps reads to): the units and why. Raises
    :class:`LeRobotUnitsError` naming the ambiguity when the values fit more than one."""
    gripper = spec.n_motors - 1
    values = np.asarray(state, dtype=np.float64)
    arm = np.abs(values[:, :gripper])
    arm = np.where(np.isfinite(arm), arm, 0.0)
    if not arm.size:
        raise LeRobotUnitsError("no finite joint positions to tell their units from")
    peak = arm.max(axis=0)
    worst = int(np.argmax(peak))
    largest = f"|{motors[worst]}| up to {peak[worst]:.1f}"
    resolution = _resolution(spec)
    if peak[worst] > 360.0:
        whole = np.all(np.asarray(values)[np.isfinite(values)] % 1.0 == 0.0)
        if whole and np.nanmin(values) >= 0 and np.nanmax(values) < resolution:
            return "steps", f"whole values within 0..{resolution - 1} ({largest}): raw encoder steps"
        raise LeRobotUnitsError(f"joint positions ({largest}) are neither LeRobot degrees, -100..100 range units "
                                "nor raw encoder steps")
    if peak[worst] > RANGE_LIMIT + 1e-3:
        return "degrees", f"{largest} is beyond the +-100 of range mode"
    grid = _grid_units(values, spec, motors)
    if grid is not None:
        return grid
    if calibration is not None:
        half = np.array([(calibration.motors[j].range_max - calibration.motors[j].range_min) / 2.0
                         for j in spec.joint_names[:gripper]]) * 360.0 / (resolution - 1)
        beyond = np.flatnonzero(peak > half + 1.0)
        if beyond.size:
            k = int(beyond[0])
            return "range", (f"|{motors[k]}| up to {peak[k]:.1f} is beyond its calibrated half-range of "
                             f"{half[k]:.1f} degrees, so the values are -100..100 range units")
    raise LeRobotUnitsError(
        f"joint units are ambiguous: every arm-joint position lies within +-100 ({largest}) and on no grid that "
        "tells degrees (use_degrees) from LeRobot's -100..100 range mode, and meta/info.json does not say which; "
        "pass --joint-units degrees, or --joint-units range with the calibration")


def check_gripper(values: np.ndarray, motor: str, units: str) -> None:
    """The gripper is LeRobot's 0..100 in degrees and range mode; refuse values that are not."""
    if units == "steps":
        return
    finite = np.asarray(values)[np.isfinite(values)]
    if finite.size and (finite.min() < -GRIPPER_SLACK or finite.max() > 100.0 + GRIPPER_SLACK):
        raise LeRobotUnitsError(f"{motor} positions {finite.min():.1f}..{finite.max():.1f} are not LeRobot's 0..100 "
                                "gripper range")


# ----------------------------------------------------------------------------------------- telemetry

# Units a telemetry value may be named in (``<motor>.load_pct``), per NAD field; ``raw`` = the register value.
SIGNAL_UNITS = {
    "velocity": ("deg_s", "rad_s", "raw"),
    "load": ("pct", "permille", "frac", "raw"),
    "current": ("mA", "A", "raw"),
    "pwm": ("pct", "frac", "raw"),
    "input_voltage": ("V", "raw"),
    "temperature": ("degC",),
}
UNIT_WORDS = {"deg_s": "deg/s", "rad_s": "rad/s", "pct": "percent", "permille": "0.1 % units", "frac": "fraction",
              "mA": "mA", "A": "A", "V": "V", "degC": "degC"}


def _whole(values: np.ndarray) -> bool:
    return bool(np.all(values % 1.0 == 0.0))


def _load_sign_bit() -> int:
    from na_description import sts3215

    return int(sts3215.REGISTERS["present_load"].sign_bit)


def decide_unit(signal: str, values: np.ndarray, unit: str | None, spec: RobotSpec, where: str) -> tuple[str, str]:
    """The unit of one telemetry signal over the whole dataset (``values``: every recorded value) and a note on
    how it was told: named (``<motor>.load_pct``, ``--load-units``), else the register unit of the spec's servo
    that LeRobot's bus reads, Present Load and voltage told from their values. Raises
    :class:`LeRobotUnitsError` when the values fit more than one unit."""
    if unit is not None:
        if unit not in SIGNAL_UNITS.get(signal, ()):
            raise LeRobotUnitsError(f"{where}: unknown unit {unit!r} for {signal} (known: "
                                    f"{', '.join(SIGNAL_UNITS.get(signal, ()))})")
        return unit, f"{UNIT_WORDS.get(unit, 'register units')} (named)"
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if signal == "temperature":
        return "degC", "degC"
    if signal == "input_voltage":
        if finite.size and np.median(finite) < 30.0:
            return "V", "V (told from the values: median below 30)"
        return "raw", "0.1 V register units (told from the values: median 30 or more)"
    if signal != "load":
        return "raw", f"{spec.servo_model} register units (what LeRobot's bus reads unnormalised)"
    from na_description import sts3215

    sign = _load_sign_bit()
    if finite.size and finite.min() >= 0 and finite.max() >= 1 << sign and finite.max() < 1 << (sign + 1) \
            and _whole(finite):
        return "raw", (f"raw Present Load words, sign in bit {sign} not decoded (as older LeRobot releases stored "
                       "them): decoded here")
    if finite.size and np.abs(finite).max() > sts3215.DUTY_FULL_SCALE:
        raise LeRobotUnitsError(f"{where}: Present Load values beyond +-{sts3215.DUTY_FULL_SCALE} (0.1 % units): "
                                "not the signed register value")
    if finite.size and np.abs(finite).max() <= 1.0 and not _whole(finite):
        raise LeRobotUnitsError(f"{where}: load values within +-1 with fractions fit both a signed fraction and "
                                "0.1 % register units; name the unit (<motor>.load_frac or .load_permille) or pass "
                                "--load-units")
    return "permille", "Present Load in 0.1 % units (LeRobot's signed register value; told from the values)"


def signal_to_si(signal: str, values: np.ndarray, unit: str, spec: RobotSpec) -> np.ndarray:
    """One per-motor telemetry signal ``[T, n]`` in ``unit`` (see :func:`decide_unit`) -> the NAD's SI unit."""
    from na_description import sts3215

    table = servo_table(spec)
    values = np.asarray(values, dtype=np.float64)
    direction = np.array([j.drive_direction for j in spec.joints], dtype=float)
    scale = {"pct": 0.01, "frac": 1.0, "mA": 1e-3, "A": 1.0, "V": 1.0, "degC": 1.0, "rad_s": 1.0,
             "deg_s": np.pi / 180.0}
    if signal == "load":
        if unit == "raw":
            sign = _load_sign_bit()
            decode = np.vectorize(lambda v: sts3215.decode_sign_magnitude(int(v), sign), otypes=[float])
            finite = np.isfinite(values)
            return np.where(finite, sts3215.load_units_to_fraction(decode(np.where(finite, values, 0.0))), np.nan)
        return sts3215.load_units_to_fraction(values) if unit == "permille" else values * scale[unit]
    if unit != "raw":
        return values * scale[unit]
    if signal == "velocity":
        return direction * table.velocity_units_to_rad_s(values)
    if signal == "current":
        return table.current_units_to_amp(values)
    if signal == "input_voltage":
        return table.voltage_units_to_volt(values)
    if signal == "pwm" and hasattr(table, "pwm_units_to_fraction"):
        return table.pwm_units_to_fraction(values)
    raise LeRobotUnitsError(f"{signal} in register units is not known for {spec.servo_model}")
