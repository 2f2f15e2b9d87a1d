"""Per-robot task profile: the robot-specific numbers of the scripted operator (ROS-free).

``na_sim/config/tasks_<robot>.yaml`` holds, for one robot spec, which tasks it runs, its payload
sets, the joints the inverse kinematics solves for, the rest pose, gripper openings and every
workspace range the task builders draw from (:mod:`na_sim.tasks`). The task library itself holds
no pose, joint index or joint count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from na_description.spec import RobotSpec
from na_description.yaml_file import load_yaml_mapping

CONFIG_DIR = Path(__file__).resolve().parent / "config"

Range = tuple[float, float]


class TaskProfileError(ValueError):
    """A task profile is missing, malformed or does not fit its robot's spec."""


@dataclass(frozen=True)
class Box:
    """A box of 3-D points (m) plus a pitch range (rad): where a task puts the tool."""

    low: tuple[float, float, float]
    high: tuple[float, float, float]
    pitch: Range = (0.0, 0.0)


@dataclass(frozen=True)
class TaskProfile:
    robot: str
    tasks: tuple[str, ...] | None                 # None: every task of the library
    payloads: dict[str, tuple[float, ...]]        # payload task -> default payload set (g)
    ik: np.ndarray                                # indices of the IK joints (arm joints, spec order)
    arm: np.ndarray                               # indices of all arm (revolute) joints, leading
    gripper: int                                  # index of the gripper
    pitch_row: np.ndarray                         # d(pitch)/dq over the IK joints
    yaw_sign: float
    ik_starts: tuple[tuple[float, float], ...]
    home: np.ndarray                              # arm joints of the rest pose
    home_noise: float
    gripper_open_slide: Range
    gripper_grip_slide: Range
    circle: Box
    circle_radius: Range
    sweep_holds: dict[int, tuple[tuple[int, float, float], ...]]   # swept joint -> (held joint, low, high)...
    lean_back: tuple[Range, ...]
    lean_forward: tuple[Range, ...]
    table_x: Range
    table_y_abs: Range
    table_z: Range
    grasp_pitch: Range
    lift: Range
    go_up: Box
    push: dict[str, Box]                          # pz, nz, lateral
    press_depth: dict[str, Range]

    def supports(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


def _pair(value, what: str) -> Range:
    low, high = (float(v) for v in value)
    if not low <= high:
        raise TaskProfileError(f"{what}: range [{low}, {high}] has low > high")
    return low, high


def _box(raw: dict, what: str) -> Box:
    low, high = tuple(float(v) for v in raw["low"]), tuple(float(v) for v in raw["high"])
    if len(low) != 3 or len(high) != 3:
        raise TaskProfileError(f"{what}: low/high need 3 values (m)")
    return Box(low, high, _pair(raw.get("pitch", (0.0, 0.0)), f"{what}.pitch"))


def profile_path(robot: str, spec: RobotSpec | None = None) -> Path:
    """``tasks_<robot>.yaml``: shipped in ``na_sim/config/``, else beside the robot's spec file (an arm added as
    files on ``$NA_ROBOT_PATH``)."""
    shipped = CONFIG_DIR / f"tasks_{robot}.yaml"
    if shipped.is_file() or spec is None or spec.source is None:
        return shipped
    return spec.source.parent / f"tasks_{robot}.yaml"


_CACHE: dict[tuple[str, Path], TaskProfile] = {}


def _load(robot: str, spec: RobotSpec) -> TaskProfile:
    path = profile_path(robot, spec)
    if not path.is_file():
        raise TaskProfileError(f"robot '{robot}' has no task profile ({path.name} in {CONFIG_DIR} or beside its "
                               "spec)")
    raw = load_yaml_mapping(path, TaskProfileError, "task profile")
    try:
        return _parse(raw, spec)
    except (KeyError, TypeError, ValueError) as err:
        raise TaskProfileError(f"{path}: {err}") from None


def task_profile(spec: RobotSpec) -> TaskProfile:
    """The task profile of ``spec``'s robot (cached per spec file)."""
    key = (spec.name, spec.mjcf_path)
    if key not in _CACHE:
        _CACHE[key] = _load(spec.name, spec)
    return _CACHE[key]


def _parse(raw: dict, spec: RobotSpec) -> TaskProfile:
    if raw.get("robot") != spec.name:
        raise TaskProfileError(f"profile is for robot {raw.get('robot')!r}, not {spec.name!r}")
    names = spec.joint_names
    index = {name: k for k, name in enumerate(names)}

    def joint(name: str) -> int:
        if name not in index:
            raise TaskProfileError(f"{name!r} is not a joint of {spec.name} ({', '.join(names)})")
        return index[name]

    arm = np.array([k for k, j in enumerate(spec.joints) if j.type == "revolute"])
    gripper = next(k for k, j in enumerate(spec.joints) if j.type == "gripper")
    if not np.array_equal(arm, np.arange(len(arm))):
        raise TaskProfileError("the arm joints must lead the spec's joint order (the kinematics sets leading joints)")
    ik = np.array([joint(n) for n in raw["ik_joints"]])
    if len(ik) == 0 or not set(ik) <= set(arm.tolist()) or np.any(np.diff(ik) <= 0):
        raise TaskProfileError("ik_joints must be arm joints, each once, in spec order")
    pitch_row = np.array([float(v) for v in raw["pitch_row"]])
    home = np.array([float(v) for v in raw["home"]])
    if len(pitch_row) != len(ik) or len(home) != len(arm):
        raise TaskProfileError(f"pitch_row needs {len(ik)} values (IK joints), home {len(arm)} (arm joints)")
    lean = raw["lean_extend"]
    for key in ("back", "forward"):
        if len(lean[key]) != len(ik):
            raise TaskProfileError(f"lean_extend.{key} needs {len(ik)} ranges (IK joints)")
    tasks = raw.get("tasks", "all")
    circle = raw["circle"]
    table = raw["table_point"]
    return TaskProfile(
        robot=spec.name,
        tasks=None if tasks == "all" else tuple(str(t) for t in tasks),
        payloads={str(task): tuple(float(g) for g in grams) for task, grams in raw.get("payloads", {}).items()},
        ik=ik, arm=arm, gripper=gripper, pitch_row=pitch_row, yaw_sign=float(raw.get("yaw_sign", 1.0)),
        ik_starts=tuple((float(a), float(b)) for a, b in raw["ik_starts"]),
        home=home, home_noise=float(raw.get("home_noise_rad", 0.0)),
        gripper_open_slide=_pair(raw["gripper_open_slide"], "gripper_open_slide"),
        gripper_grip_slide=_pair(raw["gripper_grip_slide"], "gripper_grip_slide"),
        circle=_box({"low": circle["center_low"], "high": circle["center_high"], "pitch": circle["pitch"]}, "circle"),
        circle_radius=_pair(circle["radius"], "circle.radius"),
        sweep_holds={joint(swept): tuple((joint(held), float(lo), float(hi)) for held, lo, hi in holds)
                     for swept, holds in (raw.get("sweep_holds") or {}).items()},
        lean_back=tuple(_pair(r, "lean_extend.back") for r in lean["back"]),
        lean_forward=tuple(_pair(r, "lean_extend.forward") for r in lean["forward"]),
        table_x=_pair(table["x"], "table_point.x"), table_y_abs=_pair(table["y_abs"], "table_point.y_abs"),
        table_z=_pair(table["z"], "table_point.z"),
        grasp_pitch=_pair(raw["grasp_pitch"], "grasp_pitch"), lift=_pair(raw["lift"], "lift"),
        go_up=_box(raw["go_up"], "go_up"),
        push={kind: _box(box, f"push.{kind}") for kind, box in (raw.get("push") or {}).items()},
        press_depth={axis: _pair(r, f"press_depth.{axis}") for axis, r in (raw.get("press_depth") or {}).items()},
    )
