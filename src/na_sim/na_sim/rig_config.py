"""Configuration of the simulated rig (``na_sim/na_sim/config/sim_rig.yaml``), ROS-free.

The shipped YAML files live beside this module in ``na_sim/config/``; ``find_config`` resolves a
name there or takes a path (:mod:`na_common.config_files`). A rig config belongs to one robot
(``robot:``, a shipped spec name, default the OpenManipulator-X): per-servo lists have one value
per joint of that robot's spec. The joint the ``restriction`` bands act on is the spec's
``condition_joint``. ``sim_rig.yaml`` is the OpenManipulator-X rig, ``sim_rig_so101.yaml`` the
SO-101's; :func:`rig_config_for` names a robot's shipped rig config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from na_common.config_files import ConfigFileError, resolve_config
from na_common.fixture import FixturePose, FixturePoseError
from na_description.spec import ROBOT_ALIASES, SpecError, load_spec
from na_description.yaml_file import load_yaml_mapping
from na_sim.rig_config_error import RigConfigError
from na_sim.sim_family import sim_family

RIG_CONFIG_NAME = "sim_rig.yaml"
SERVO_CONFIG_NAME = "servo_xm430.yaml"
DEFAULT_ROBOT = "open_manipulator_x"
# Shipped rig config of each robot that has one (the OpenManipulator-X's is the unprefixed default).
ROBOT_RIG_CONFIGS = {DEFAULT_ROBOT: RIG_CONFIG_NAME, "so101": "sim_rig_so101.yaml"}
CONFIG_DIR = Path(__file__).resolve().parent / "config"


def find_config(name: str | Path, what: str = "rig config") -> Path:
    """A rig/servo config file: a path, or a name shipped in ``na_sim/config/`` (``sim_rig``, ``sim_rig.yaml``)."""
    try:
        return resolve_config(name, CONFIG_DIR, what)
    except ConfigFileError as err:
        raise RigConfigError(str(err)) from None


def robot_name(robot: str | None) -> str:
    """A robot's spec name from a command-line/launch name (``omx_x`` or ``open_manipulator_x``, ``so101``)."""
    robot = DEFAULT_ROBOT if robot is None else str(robot)
    return ROBOT_ALIASES.get(robot, robot)


def rig_config_for(robot: str | None) -> str:
    """The shipped rig config of ``robot`` (one-line error for a robot without one)."""
    name = robot_name(robot)
    if name in ROBOT_RIG_CONFIGS:
        return ROBOT_RIG_CONFIGS[name]
    try:                           # an arm added as files: its rig config sits beside its spec
        source = load_spec(name).source
    except SpecError:
        source = None
    if source is not None and (source.parent / f"sim_rig_{name}.yaml").is_file():
        return str(source.parent / f"sim_rig_{name}.yaml")
    known = ", ".join(sorted({*ROBOT_RIG_CONFIGS, *ROBOT_ALIASES}))
    raise RigConfigError(f"no simulated rig for robot {robot!r} (known: {known}; an arm on $NA_ROBOT_PATH needs "
                         f"sim_rig_{name}.yaml beside its spec)") from None


def parse_fixture(pose) -> FixturePose:
    """The fixture pose of a rig config or an episode (:class:`na_common.fixture.FixturePose`)."""
    try:
        return FixturePose.parse(pose)
    except FixturePoseError as err:
        raise RigConfigError(str(err)) from None


# Keys of na_sim/config/sim_rig.yaml: a typo is an error, not a silently ignored setting.
_KNOWN_KEYS: dict[str, set[str] | None] = {
    "base": None, "follower_wear": None, "robot": None,
    "servo_config": None, "timestep_s": None, "reflected_inertia_kg_m2": None,
    "supply": {"voltage_v", "source_resistance_ohm", "filter_time_s"},
    "ambient_temperature_c": None, "initial_warmup_c": None, "initial_pose": None,
    "follower_setup": {"operating_mode", "position_p_gain", "position_i_gain", "position_d_gain"},
    "leader": {"standby_current_noise_a"},
    "payload": {"offset_from_tool_m", "radius_m", "grasp_stop_slide_m", "grasp_stiffness_n_m", "grasp_damping_n_s_m"},
    "fixture": {"position", "rpy", "half_size_m", "friction"},
    "tool_collider_radius_m": None,
    "restriction": {"stiffness_nm_rad", "rest_angle_rad", "damping_nm_s_rad", "friction_nm"},
    "joint3_restriction": {"stiffness_nm_rad", "rest_angle_rad", "damping_nm_s_rad", "friction_nm"},
}


def _check_keys(raw: dict, known: dict[str, set[str] | None]) -> None:
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; known: {sorted(known)}")
    for section, keys in known.items():
        if keys is None or section not in raw:
            continue
        if not isinstance(raw[section], dict):
            raise ValueError(f"section {section!r} must be a mapping")
        unknown = sorted(set(raw[section]) - keys)
        if unknown:
            raise ValueError(f"{section}: unknown keys {unknown}; known: {sorted(keys)}")


def _load_with_base(path: Path, seen: tuple[Path, ...]) -> dict:
    """A rig config mapping; ``base: NAME`` first loads that config (a path relative to this file or a
    shipped name) and this file's sections then replace or extend it key by key."""
    raw = load_yaml_mapping(path, RigConfigError, "rig config")
    base_name = raw.pop("base", None)
    if base_name is None:
        return raw
    base_path = path.parent / str(base_name)
    base_path = base_path if base_path.is_file() else find_config(str(base_name))
    if base_path.resolve() in seen or base_path.resolve() == path.resolve():
        raise RigConfigError(f"{path}: base {base_name} includes itself")
    merged = _load_with_base(base_path, (*seen, path.resolve()))
    for key, value in raw.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class RigConfig:
    """Everything about the rig that is not the servo's physics (that is ``servo_config``)."""

    servo_config: Path
    robot: str = DEFAULT_ROBOT           # the spec this rig simulates (na_description.load_spec name)
    servo_family: str = "xm430"          # ``family`` of servo_config (which firmware and control table)
    timestep_s: float = 0.00425
    reflected_inertia: float = 0.1
    supply_voltage: float = 12.0
    supply_resistance: float = 0.25
    supply_filter_time: float = 0.01
    ambient_temperature: float = 25.0
    initial_warmup: tuple[float, float] = (0.0, 8.0)
    initial_pose: tuple[float, ...] = (0.0, -1.0, 0.3, 0.7, 0.0)
    follower_mode: int = 4
    follower_p_gain: tuple[int, ...] = (800,) * 5
    follower_i_gain: tuple[int, ...] = (0,) * 5
    follower_d_gain: tuple[int, ...] = (1000, 800, 500, 300, 0)
    leader_current_noise: float = 0.003
    payload_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    payload_radius: float = 0.025
    grasp_stop_slide: float = 0.003
    grasp_stiffness: float = 300000.0
    grasp_damping: float = 10000.0
    fixture: FixturePose = field(default_factory=lambda: FixturePose((0.22, 0.0, 0.06)))
    fixture_half_size: tuple[float, float, float] = (0.02, 0.02, 0.02)
    fixture_friction: float = 0.6
    tool_collider_radius: float = 0.008
    restriction_stiffness: float = 0.8
    restriction_rest_angle: float = -0.6
    restriction_damping: float = 0.15
    restriction_friction: float = 0.08
    # A worn or different follower: factors on named servo parameters (``ServoParams`` fields, e.g.
    # coulomb_nm 2.0), applied to the follower's servos only (the leader reads positions).
    follower_wear: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_yaml(cls, path: str | Path | None = None) -> RigConfig:
        """Load the shipped ``sim_rig.yaml`` or ``path`` (a file or a shipped name); missing keys keep the
        defaults above."""
        path = find_config(path if path is not None else RIG_CONFIG_NAME)
        raw = _load_with_base(path, seen=())
        try:
            return cls._from_mapping(raw, path.parent)
        except (KeyError, TypeError, ValueError) as exc:
            raise RigConfigError(f"{path}: {exc}") from exc

    @classmethod
    def _from_mapping(cls, raw: dict, base_dir: Path) -> RigConfig:
        _check_keys(raw, _KNOWN_KEYS)
        servo_name = str(raw.get("servo_config", SERVO_CONFIG_NAME))
        servo_path = base_dir / servo_name
        if not servo_path.is_file():
            servo_path = find_config(servo_name, "servo config")   # a shipped servo model named by a user's rig file
        supply = raw.get("supply", {})
        setup = raw.get("follower_setup", {})
        payload = raw.get("payload", {})
        fixture = raw.get("fixture", {})
        if "restriction" in raw and "joint3_restriction" in raw:
            raise ValueError("give the restriction once: 'restriction' (or its old name 'joint3_restriction')")
        restriction = raw.get("restriction", raw.get("joint3_restriction", {}))
        servo_raw = load_yaml_mapping(servo_path, RigConfigError, "servo config")
        d = cls.__dataclass_fields__
        default = {name: f.default for name, f in d.items()}

        def ints(values, name):
            return tuple(int(v) for v in values)

        wear = raw.get("follower_wear", {}) or {}
        if not isinstance(wear, dict):
            raise ValueError("follower_wear must map servo parameter names to factors")
        config = cls(
            robot=robot_name(raw.get("robot", DEFAULT_ROBOT)),
            servo_family=str(servo_raw.get("family", "xm430")),
            follower_wear=tuple(sorted((str(k), float(v)) for k, v in wear.items())),
            servo_config=servo_path,
            timestep_s=float(raw.get("timestep_s", default["timestep_s"])),
            reflected_inertia=float(raw.get("reflected_inertia_kg_m2", default["reflected_inertia"])),
            supply_voltage=float(supply.get("voltage_v", default["supply_voltage"])),
            supply_resistance=float(supply.get("source_resistance_ohm", default["supply_resistance"])),
            supply_filter_time=float(supply.get("filter_time_s", default["supply_filter_time"])),
            ambient_temperature=float(raw.get("ambient_temperature_c", default["ambient_temperature"])),
            initial_warmup=tuple(float(v) for v in raw.get("initial_warmup_c", default["initial_warmup"])),
            initial_pose=tuple(float(v) for v in raw.get("initial_pose", default["initial_pose"])),
            follower_mode=int(setup.get("operating_mode", default["follower_mode"])),
            follower_p_gain=ints(setup.get("position_p_gain", default["follower_p_gain"]), "position_p_gain"),
            follower_i_gain=ints(setup.get("position_i_gain", default["follower_i_gain"]), "position_i_gain"),
            follower_d_gain=ints(setup.get("position_d_gain", default["follower_d_gain"]), "position_d_gain"),
            leader_current_noise=float(raw.get("leader", {}).get("standby_current_noise_a",
                                                                  default["leader_current_noise"])),
            payload_offset=tuple(float(v) for v in payload.get("offset_from_tool_m", default["payload_offset"])),
            payload_radius=float(payload.get("radius_m", default["payload_radius"])),
            grasp_stop_slide=float(payload.get("grasp_stop_slide_m", default["grasp_stop_slide"])),
            grasp_stiffness=float(payload.get("grasp_stiffness_n_m", default["grasp_stiffness"])),
            grasp_damping=float(payload.get("grasp_damping_n_s_m", default["grasp_damping"])),
            fixture=parse_fixture(fixture) if "position" in fixture else FixturePose((0.22, 0.0, 0.06)),
            fixture_half_size=tuple(float(v) for v in fixture.get("half_size_m", default["fixture_half_size"])),
            fixture_friction=float(fixture.get("friction", default["fixture_friction"])),
            tool_collider_radius=float(raw.get("tool_collider_radius_m", default["tool_collider_radius"])),
            restriction_stiffness=float(restriction.get("stiffness_nm_rad", default["restriction_stiffness"])),
            restriction_rest_angle=float(restriction.get("rest_angle_rad", default["restriction_rest_angle"])),
            restriction_damping=float(restriction.get("damping_nm_s_rad", default["restriction_damping"])),
            restriction_friction=float(restriction.get("friction_nm", default["restriction_friction"])),
        )
        config.validate()
        return config

    def validate(self) -> None:
        for name, factor in self.follower_wear:
            if not (math.isfinite(factor) and factor > 0):
                raise RigConfigError(f"follower_wear.{name} must be a positive factor, got {factor}")
        if not 0 < self.timestep_s <= 0.01:
            raise RigConfigError(f"timestep_s must be in (0, 0.01] s, got {self.timestep_s}")
        if self.reflected_inertia <= 0 or self.supply_voltage <= 0 or self.supply_resistance < 0:
            raise RigConfigError("reflected inertia and supply voltage must be positive, supply resistance >= 0")
        self._validate_against_robot()
        if len(self.initial_warmup) != 2 or self.initial_warmup[0] > self.initial_warmup[1]:
            raise RigConfigError("initial_warmup_c must be [low, high]")
        if len(self.fixture_half_size) != 3 or min(self.fixture_half_size) <= 0:
            raise RigConfigError("fixture half_size_m needs 3 positive values")

    def _validate_against_robot(self) -> None:
        """Lengths, the servo family and the follower's mode against the robot's spec."""
        try:
            spec = load_spec(self.robot)
        except SpecError as err:
            raise RigConfigError(f"robot: {err}") from None
        family = sim_family(self.servo_family, spec)
        n = spec.n_motors
        for name, values in (("initial_pose", self.initial_pose),
                             ("follower_setup.position_p_gain", self.follower_p_gain),
                             ("follower_setup.position_i_gain", self.follower_i_gain),
                             ("follower_setup.position_d_gain", self.follower_d_gain)):
            if len(values) != n:
                raise RigConfigError(f"{name} needs {n} values (one per {spec.name} joint), got {len(values)}")
        if self.follower_mode not in family.position_modes:
            modes = ", ".join(str(m) for m in family.position_modes)
            raise RigConfigError(f"follower_setup.operating_mode must be a {family.name} position mode ({modes}), "
                                 f"got {self.follower_mode}")
