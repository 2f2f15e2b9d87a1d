"""Robot spec: joint names, servo IDs, limits, effort bounds, homing and the gripper map.

The YAML next to the MJCF is the single source of these numbers; everything else (driver,
simulator, features, training, estimator) reads them through :func:`load_spec`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

ROBOTS_DIR = Path(__file__).resolve().parent / "robots"
# Folders (os.pathsep-separated) searched after ROBOTS_DIR for a robot named <name>: <name>.yaml and its MJCF, with
# the simulator's tasks_<name>.yaml and sim_rig_<name>.yaml (or torque_arm_<name>.yaml) beside them; an arm is
# added as files, not code.
ROBOT_PATH_VARIABLE = "NA_ROBOT_PATH"
# Companion files that share a robot folder with the specs and are not specs themselves.
_COMPANION_PREFIXES = ("tasks_", "sim_rig_", "torque_arm_", "convert_")
DEFAULT_ROBOT = "open_manipulator_x"
# Short names accepted wherever a robot is named (launch argument robot:=omx_x, --robot omx_x).
ROBOT_ALIASES = {"omx_x": "open_manipulator_x"}
# The servo telemetry a robot's model reads as its effort input (ArmState field): XM430 Present Current
# (A), or the Feetech Present Load (signed fraction of the maximum output).
EFFORT_SIGNALS = ("current", "load")


class SpecError(ValueError):
    """A robot spec file is missing, malformed or inconsistent."""


class JointNameError(ValueError):
    """Named values (a message's ``name`` and its arrays) do not match the spec's joints; the message says how."""


@dataclass(frozen=True)
class JointSpec:
    name: str
    servo_id: int
    type: str                 # "revolute" or "gripper"
    lower: float              # rad (gripper: slide, m)
    upper: float              # rad (gripper: slide, m)
    effort: float             # symmetric simulator effort bound (N*m; gripper: slide force)
    homing_offset: float      # rad added to the servo angle
    drive_direction: int      # +1 or -1


@dataclass(frozen=True)
class GripperMap:
    """Linear map between the gripper servo angle (rad) and the single-finger slide (m)."""

    angle_points: tuple[float, float]
    slide_points: tuple[float, float]
    unit: str = "m"                 # of the simulator coordinate: "m" (a finger slide) or "rad" (a jaw hinge)

    @property
    def slope(self) -> float:
        """Slide metres per servo radian."""
        (a0, a1), (s0, s1) = self.angle_points, self.slide_points
        return (s1 - s0) / (a1 - a0)

    def angle_to_slide(self, angle):
        """Also on jax arrays (traced), which pass through as they are."""
        angle = angle if hasattr(angle, "shape") else np.asarray(angle)
        return self.slide_points[0] + (angle - self.angle_points[0]) * self.slope

    def slide_to_angle(self, slide):
        return self.angle_points[0] + (np.asarray(slide) - self.slide_points[0]) / self.slope


def joint_order(names: Sequence[str], joint_names: Sequence[str], robot: str = "the arm",
                allow_extra: bool = False) -> np.ndarray:
    """Index array putting values named ``names`` into the order ``joint_names``; ``names`` must hold each
    of ``joint_names`` exactly once and, unless ``allow_extra`` (recorded data from a rig with more servos,
    e.g. a camera mount), nothing else. :class:`JointNameError` names what is unknown, missing or duplicated."""
    names = [str(n) for n in names]
    joint_names = list(joint_names)
    first: dict[str, int] = {}
    for k, name in enumerate(names):
        first.setdefault(name, k)
    known = set(joint_names)
    problems = []
    if (unknown := [n for n in first if n not in known]) and not allow_extra:
        problems.append(f"unknown {unknown}")
    if missing := [n for n in joint_names if n not in first]:
        problems.append(f"missing {missing}")
    if duplicated := sorted({n for k, n in enumerate(names) if first[n] != k}):
        problems.append(f"duplicated {duplicated}")
    if problems:
        raise JointNameError(f"joint names {names} do not match {robot}'s {joint_names}: " + ", ".join(problems))
    return np.array([first[n] for n in joint_names], dtype=int)


@dataclass(frozen=True)
class RobotSpec:
    name: str
    mjcf_path: Path
    base_frame: str
    tool_site: str
    frame_period: float
    servo_model: str
    servo_model_number: int
    effort_signal: str            # ArmState field the model reads as effort: one of EFFORT_SIGNALS
    condition_joint: str          # the joint whose condition is supervised (the one the rig can restrict)
    baud_rate: int
    position_gains: dict[str, int]
    joints: tuple[JointSpec, ...]
    gripper: GripperMap
    source: Path | None = None    # the spec YAML it was read from (its folder holds the robot's other files)

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @property
    def arm_joint_names(self) -> list[str]:
        return [j.name for j in self.joints if j.type == "revolute"]

    @property
    def n_motors(self) -> int:
        return len(self.joints)

    @property
    def n_arm(self) -> int:
        return len(self.arm_joint_names)

    @property
    def gripper_index(self) -> int | None:
        """Motor index of the gripper, None for an arm without one."""
        return next((k for k, j in enumerate(self.joints) if j.type == "gripper"), None)

    @property
    def servo_ids(self) -> list[int]:
        return [j.servo_id for j in self.joints]

    @property
    def effort_bounds(self) -> np.ndarray:
        """Upper effort bound per motor (the lower bound is its negative)."""
        return np.array([j.effort for j in self.joints])

    @property
    def lower(self) -> np.ndarray:
        """Lower limit per motor in simulator coordinates (rad; gripper slide m)."""
        return np.array([j.lower for j in self.joints])

    @property
    def upper(self) -> np.ndarray:
        return np.array([j.upper for j in self.joints])

    def index_of(self, names: Sequence[str]) -> np.ndarray:
        """Index array putting values named ``names`` into spec order: ``values[spec.index_of(names)]``.

        ``names`` must name every joint of the spec exactly once, in any order, and nothing else; otherwise
        :class:`JointNameError` says which names are unknown, missing or duplicated. The one name -> index
        mapping of the suite (:func:`joint_order`): drivers, teleop, estimator and conversion reorder through it.
        """
        return joint_order(names, self.joint_names, self.name)

    def reorder(self, names: Sequence[str], values, what: str = "values") -> np.ndarray:
        """``values`` named by ``names`` (a message's ``name`` and one of its arrays) in spec order.

        Raises :class:`JointNameError` when the names do not match the spec (see :meth:`index_of`) or when
        ``values`` does not hold one entry per name.
        """
        values = np.asarray(values)
        if values.shape != (len(names),):
            raise JointNameError(f"{what} has {values.size} values for {len(names)} joint names")
        return values[self.index_of(names)]

    def servo_to_joint(self, servo_angle):
        """Servo angle (rad, 2048 pulses = 0) -> joint-side angle: direction * angle + homing offset."""
        direction = np.array([j.drive_direction for j in self.joints], dtype=float)
        offset = np.array([j.homing_offset for j in self.joints])
        return direction * np.asarray(servo_angle, dtype=float) + offset

    def joint_to_servo(self, joint_angle):
        """Inverse of :meth:`servo_to_joint`."""
        direction = np.array([j.drive_direction for j in self.joints], dtype=float)
        offset = np.array([j.homing_offset for j in self.joints])
        return (np.asarray(joint_angle, dtype=float) - offset) * direction

    def to_sim_coordinates(self, joint_angle):
        """Joint-side angles (gripper: servo angle, rad) -> MuJoCo coordinates (gripper: slide, m)."""
        q = np.array(joint_angle, dtype=float)
        for k, joint in enumerate(self.joints):
            if joint.type == "gripper":
                q[..., k] = self.gripper.angle_to_slide(q[..., k])
        return q

    def servo_angle_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Joint-side position limits in servo angle terms (rad), the gripper mapped from slide."""
        lower, upper = self.lower.copy(), self.upper.copy()
        for k, joint in enumerate(self.joints):
            if joint.type == "gripper":
                a, b = self.gripper.slide_to_angle([joint.lower, joint.upper])
                lower[k], upper[k] = min(a, b), max(a, b)
        return lower, upper


def _require(mapping: dict, key: str, where: str):
    if key not in mapping:
        raise SpecError(f"{where}: missing key '{key}'")
    return mapping[key]


def shipped_robots() -> list[str]:
    """Names of the robots whose spec ships in ``robots/`` (``load_spec(name)``)."""
    return sorted(p.stem for p in ROBOTS_DIR.glob("*.yaml"))


def robot_dirs() -> list[Path]:
    """Where a robot's name is looked up: the shipped ``robots/``, then each folder of ``$NA_ROBOT_PATH``."""
    extra = os.environ.get(ROBOT_PATH_VARIABLE, "")
    return [ROBOTS_DIR, *(Path(folder).expanduser() for folder in extra.split(os.pathsep) if folder)]


def known_robots() -> list[str]:
    """Every robot name ``load_spec`` resolves: the shipped ones and those on ``$NA_ROBOT_PATH``."""
    names = {path.stem for folder in robot_dirs() for path in folder.glob("*.yaml")
             if not path.stem.startswith(_COMPANION_PREFIXES)}
    return sorted(names)


def _spec_path(robot: str | Path | None) -> Path:
    """A spec YAML path, or the file of a shipped robot named ``robot`` (a bare name like ``so101``)."""
    if robot is None:
        return ROBOTS_DIR / f"{DEFAULT_ROBOT}.yaml"
    path = Path(robot)
    if path.suffix or len(path.parts) != 1:
        return path
    robot = ROBOT_ALIASES.get(str(robot), str(robot))
    if not robot.startswith(_COMPANION_PREFIXES):
        for folder in robot_dirs():
            if (folder / f"{robot}.yaml").is_file():
                return folder / f"{robot}.yaml"
    known = ", ".join(known_robots() + [f"{alias} (= {name})" for alias, name in ROBOT_ALIASES.items()])
    raise SpecError(f"unknown robot {str(robot)!r} (known: {known}; "
                    f"${ROBOT_PATH_VARIABLE} adds folders of robot specs)")


@lru_cache(maxsize=8)
def load_spec(path: str | Path | None = None) -> RobotSpec:
    """Load a robot spec: a YAML path or a shipped robot's name (``so101``, ``omx_x``); default OpenManipulator-X."""
    spec_path = _spec_path(path)
    if not spec_path.is_file():
        raise SpecError(f"robot spec not found: {spec_path}")
    raw = yaml.safe_load(spec_path.read_text())
    where = str(spec_path)
    joints = []
    for entry in _require(raw, "joints", where):
        joint = JointSpec(
            name=str(_require(entry, "name", where)),
            servo_id=int(_require(entry, "servo_id", where)),
            type=str(_require(entry, "type", where)),
            lower=float(_require(entry, "lower", where)),
            upper=float(_require(entry, "upper", where)),
            effort=float(_require(entry, "effort", where)),
            homing_offset=float(entry.get("homing_offset", 0.0)),
            drive_direction=int(entry.get("drive_direction", 1)),
        )
        if joint.type not in ("revolute", "gripper"):
            raise SpecError(f"{where}: joint {joint.name}: type must be revolute or gripper")
        if joint.lower >= joint.upper:
            raise SpecError(f"{where}: joint {joint.name}: lower limit must be below upper")
        if joint.drive_direction not in (1, -1):
            raise SpecError(f"{where}: joint {joint.name}: drive_direction must be 1 or -1")
        joints.append(joint)
    if len({j.servo_id for j in joints}) != len(joints):
        raise SpecError(f"{where}: servo IDs must be unique")
    servo = _require(raw, "servo", where)
    grip = _require(raw, "gripper", where)
    gripper = GripperMap(tuple(map(float, grip["angle_points"])), tuple(map(float, grip["slide_points"])),
                         str(grip.get("unit", "m")))
    if gripper.unit not in ("m", "rad"):
        raise SpecError(f"{where}: gripper unit must be m (slide) or rad (hinge), got {gripper.unit!r}")
    mjcf_path = (spec_path.parent / _require(raw, "mjcf", where)).resolve()
    effort_signal = str(raw.get("effort_signal", "current"))
    if effort_signal not in EFFORT_SIGNALS:
        raise SpecError(f"{where}: effort_signal must be one of {', '.join(EFFORT_SIGNALS)}, got {effort_signal!r}")
    condition_joint = str(_require(raw, "condition_joint", where))
    if condition_joint not in [j.name for j in joints if j.type == "revolute"]:
        raise SpecError(f"{where}: condition_joint {condition_joint!r} is not one of the arm joints")
    return RobotSpec(
        name=str(raw["name"]),
        mjcf_path=mjcf_path,
        base_frame=str(raw.get("base_frame", "world")),
        tool_site=str(raw.get("tool_site", "tool")),
        frame_period=float(raw.get("frame_period", 0.017)),
        servo_model=str(servo["model"]),
        servo_model_number=int(servo["model_number"]),
        effort_signal=effort_signal,
        condition_joint=condition_joint,
        baud_rate=int(servo["baud_rate"]),
        position_gains={k: int(v) for k, v in servo["position_gains"].items()},
        joints=tuple(joints),
        gripper=gripper,
        source=spec_path.resolve(),
    )


def robot_option_help(default_note: str = "default: open_manipulator_x") -> str:
    """Help text of the suite's ``--robot`` option (every command that works on one arm's data or models)."""
    names = known_robots() + list(ROBOT_ALIASES)
    return (f"the arm: {', '.join(names)}, a robot on ${ROBOT_PATH_VARIABLE}, or a robot spec YAML path "
            f"({default_note})")
