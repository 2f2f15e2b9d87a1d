"""Training configuration: dataclasses with the paper's defaults, loaded from ``na_training/config/train/*.yaml``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from na_common.config_files import ConfigFileError, resolve_config
from na_description import RobotSpec
from na_description.features import feature_names
from na_description.yaml_file import load_yaml_mapping
from na_training import TRAIN_CONFIG_DIR
from na_training.model import ModelConfig


class ConfigError(ValueError):
    """A training config file is missing, malformed or has unknown keys."""


@dataclass(frozen=True)
class LossConfig:
    """Loss weights (paper Appendix B-a): 100·(arm + 0.02·gripper_mm) + 30·force + 1·gate."""

    position_weight: float = 100.0
    gripper_weight: float = 0.02
    gripper_scale: float = 1000.0          # gripper coordinate -> loss units: slide m -> mm (kappa_g); 1 for a
                                           # rotary jaw in rad (SO-101)
    velocity_weight: float = 0.0           # w_vel: Smooth-L1 on finite-difference joint velocities of the rollout
                                           # against the recorded poses' (5 on the SO-101 runs, 0 otherwise)
    force_weight: float = 30.0
    gate_weight: float = 1.0
    condition_weight: float = 0.0          # 100 on motor-condition runs (paper), 0 otherwise
    force_beta: float = 1.0                # Huber transition: 0.15 for force-sensor runs, 1.0 otherwise
    nonzero_force_weight: float = 5.0      # w_focal: 5 (3 for the force-sensor run)
    contact_threshold: float = 0.01        # N, |f| above this is a contact/nonzero label (paper eps)
    mask_invalid_force: bool = True        # per-channel validity mask on the force loss
    condition_joint: str = ""              # the supervised condition channel (paper Sec. IV-G); "": the robot
                                           # spec's condition_joint (joint3 on the OpenManipulator-X)
    condition_tasks: tuple[str, ...] = ()  # tasks whose episodes carry the condition loss; () = every labelled one
    # Not in the paper: class-balanced condition loss, restricted frames carry this share of it (0: plain BCE
    # over frames as the paper; 0.5: both classes alike, whatever their frame counts).
    condition_restricted_share: float = 0.0
    # The force channels the force loss supervises: the three by default; the paper's Franka runs supervise the
    # vertical component alone on known payloads (["z"]); the others are still scored by the evaluators.
    force_channels: tuple[str, ...] = ("x", "y", "z")
    # Per-arm-joint weights of the pose loss (normalised to mean 1); () = equal. Franka: [1, 1, 1, 1, 1.5, 2, 1.5].
    joint_weights: tuple[float, ...] = ()


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with linear warm-up and cosine decay to a floor (paper Appendix B-c)."""

    learning_rate: float = 1e-4
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    warmup_steps: int = 500
    decay_steps: int = 100_000             # cosine horizon, independent of the run length (paper)
    final_lr_fraction: float = 0.05        # floor of the cosine, as a fraction of learning_rate
    ema_decay: float = 0.999


@dataclass(frozen=True)
class SimConfig:
    """Differentiable simulator settings (the authors' setup: 4 substeps of 0.00425 s, velocity clip
    10 rad/s, float64)."""

    substeps: int = 0                      # MuJoCo steps per data frame; 0: the robot's (frame period / MJCF
                                           # timestep: 4 on the OpenManipulator-X, 5 on the SO-101)
    max_joint_velocity: float = 10.0
    float64: bool = True
    remat: bool = True                     # jax.checkpoint on each frame of the rollout (memory for BPTT)
    unroll_substeps: int = 1               # lax.scan unroll of the substeps of one frame
    unroll_frames: int = 1                 # lax.scan unroll of the frames of a rollout
    initial_position_noise: float = 0.15   # rad, uniform on the arm joints' initial simulated position (training only)
    # PD position actuators (the Panda's): the surrogate is their joint target ("absolute", the paper's
    # simulator-control surrogate as is) or an offset the rollout adds to the recorded command at t ("offset").
    # Torque actuators ignore it.
    position_control: str = "absolute"
    # The gripper replayed from the recording (set to the recorded next state after each frame) instead of
    # simulated: the paper's Franka runs, whose gripper the rollout does not learn.
    replay_gripper: bool = False


RECIPES = ("rollout", "hybrid")
GATE_TARGETS = ("contact", "force_threshold")
POSITION_CONTROLS = ("absolute", "offset")


@dataclass(frozen=True)
class HybridConfig:
    """The ``hybrid`` recipe (not the paper's pure form): the force, gate and condition heads learn from
    windows of *recorded* features, built as the deployed estimator builds them and batched over thousands
    of frames, while the torque surrogate keeps learning through MJX rollouts (pose loss)."""

    batch_size: int = 2048                 # recorded windows per step
    label_shift: int = 0                   # window ending at t <-> labels at t + shift (the evaluators use t)
    gate_target: str = "contact"           # "contact": the NAD contact label; "force_threshold": |f| > eps
    torque_weight: float = 0.0             # inverse-dynamics warm start of the torque head (an addition)
    torque_steps: int = 0                  # the warm-start term applies to steps < torque_steps (0: every step)
    rollout_every: int = 1                 # a rollout (pose loss) in every k-th step; 0: none
    rollout_start: int = 0                 # first step with a rollout
    rollout_weight: float = 1.0            # factor on the rollout loss in the steps that have one
    rollout_heads: bool = False            # also the paper's rollout-conditioned force/gate/condition losses
    eval_windows: int = 8192               # recorded validation windows per validation
    # Augmentation of the recorded windows (not in the paper): a uniform random offset per window and motor
    # on channels that differ between sessions and rigs (ambient/warm-up temperature, supply voltage), so
    # that the heads cannot tell episodes apart by them (the condition head otherwise memorises them).
    augment_temperature: float = 0.0       # degC, offsets in [-a, a]
    augment_voltage: float = 0.0           # V, offsets in [-a, a]

    def has_rollout(self, step: int) -> bool:
        """Whether optimisation step ``step`` (0-based) includes a rollout."""
        return self.rollout_every > 0 and step >= self.rollout_start and (step - self.rollout_start) % \
            self.rollout_every == 0

    def torque_weight_at(self, step: int) -> float:
        """Weight of the inverse-dynamics torque term at step ``step`` (0 once ``torque_steps`` have passed)."""
        if self.torque_weight <= 0 or (self.torque_steps and step >= self.torque_steps):
            return 0.0
        return float(self.torque_weight)


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    recipe: str = "rollout"                # "rollout": the paper's pure form; "hybrid": see HybridConfig
    batch_size: int = 16
    steps: int = 30_000
    # Horizon curriculum (paper Appendix B-b): [start_step, horizon] pairs, 128 -> 256 -> 320.
    curriculum: tuple[tuple[int, int], ...] = ((0, 128), (10_000, 256), (20_000, 320))
    label_shift: int = 1                   # force/gate/condition labels paired with t+1 (paper Appendix B-a)
    seed: int = 0
    log_every: int = 10
    eval_every: int = 500
    eval_batches: int = 4
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    dataset_id: str = ""

    def horizon_at(self, step: int) -> int:
        horizon = self.curriculum[0][1]
        for start, value in self.curriculum:
            if step >= start:
                horizon = value
        return horizon

    @property
    def max_horizon(self) -> int:
        return max(h for _, h in self.curriculum)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["curriculum"] = [list(pair) for pair in self.curriculum]
        data["loss"]["condition_tasks"] = list(self.loss.condition_tasks)
        data["loss"]["force_channels"] = list(self.loss.force_channels)
        data["loss"]["joint_weights"] = list(self.loss.joint_weights)
        return data


def for_robot(config: TrainConfig, spec: RobotSpec) -> TrainConfig:
    """``config`` sized for ``spec``'s arm: its feature count and motors, and its condition joint where the
    config leaves it to the robot. A config naming another arm's condition joint is an error."""
    joint = config.loss.condition_joint or spec.condition_joint
    if joint not in spec.arm_joint_names:
        raise ConfigError(f"loss.condition_joint {joint!r} is not an arm joint of {spec.name} "
                          f"({', '.join(spec.arm_joint_names)})")
    if config.loss.joint_weights and len(config.loss.joint_weights) != spec.n_arm:
        raise ConfigError(f"loss.joint_weights has {len(config.loss.joint_weights)} values for the "
                          f"{spec.n_arm} arm joints of {spec.name}")
    model = replace(config.model, num_features=len(feature_names(spec)), n_motors=spec.n_motors)
    return replace(config, model=model, loss=replace(config.loss, condition_joint=joint))


def _build(cls, raw: dict[str, Any] | None, where: str):
    raw = dict(raw or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    for key in ("condition_tasks", "force_channels"):
        if key in raw:
            raw[key] = tuple(str(v) for v in raw[key] or ())
    if "joint_weights" in raw:
        raw["joint_weights"] = tuple(float(v) for v in raw["joint_weights"] or ())
    try:
        return cls(**raw)
    except TypeError as err:
        raise ConfigError(f"{where}: {err}") from err


def config_from_dict(raw: dict[str, Any], where: str = "config") -> TrainConfig:
    raw = dict(raw or {})
    sections = {"model": ModelConfig, "loss": LossConfig, "optim": OptimConfig, "sim": SimConfig,
                "hybrid": HybridConfig}
    built = {name: _build(cls, raw.pop(name, None), f"{where}: {name}") for name, cls in sections.items()}
    if "curriculum" in raw:
        try:
            raw["curriculum"] = tuple((int(s), int(h)) for s, h in raw["curriculum"])
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}: curriculum must be a list of [start_step, horizon] pairs") from err
    config = replace(_build(TrainConfig, raw, where), **built)
    validate(config, where)
    return config


def validate(config: TrainConfig, where: str = "config") -> None:
    problems = []
    if not config.curriculum or config.curriculum[0][0] != 0:
        problems.append("curriculum must start at step 0")
    if any(h < 1 for _, h in config.curriculum):
        problems.append("horizons must be positive")
    if [s for s, _ in config.curriculum] != sorted(s for s, _ in config.curriculum):
        problems.append("curriculum steps must increase")
    if config.batch_size < 1 or config.steps < 0:
        problems.append("batch_size must be >= 1 and steps >= 0")
    if config.model.d_model % config.model.num_heads:
        problems.append("model.d_model must be divisible by model.num_heads")
    if config.sim.substeps < 0:
        problems.append("sim.substeps must be >= 1 (or 0: the robot's)")
    if not 0.0 <= config.optim.ema_decay < 1.0:
        problems.append("optim.ema_decay must be in [0, 1)")
    if not 0.0 <= config.loss.condition_restricted_share < 1.0:
        problems.append("loss.condition_restricted_share must be in [0, 1)")
    if not config.loss.force_channels or not set(config.loss.force_channels) <= {"x", "y", "z"}:
        problems.append(f"loss.force_channels must name some of x, y, z, got {list(config.loss.force_channels)}")
    if any(w <= 0 for w in config.loss.joint_weights):
        problems.append("loss.joint_weights must be positive")
    if config.sim.position_control not in POSITION_CONTROLS:
        problems.append(f"sim.position_control must be one of {list(POSITION_CONTROLS)}, "
                        f"got {config.sim.position_control!r}")
    if config.recipe not in RECIPES:
        problems.append(f"recipe must be one of {list(RECIPES)}, got {config.recipe!r}")
    hybrid = config.hybrid
    if hybrid.gate_target not in GATE_TARGETS:
        problems.append(f"hybrid.gate_target must be one of {list(GATE_TARGETS)}, got {hybrid.gate_target!r}")
    if hybrid.augment_temperature < 0 or hybrid.augment_voltage < 0:
        problems.append("hybrid.augment_temperature and hybrid.augment_voltage must be >= 0")
    if hybrid.batch_size < 1 or hybrid.label_shift < 0 or hybrid.rollout_every < 0 or hybrid.eval_windows < 1:
        problems.append("hybrid.batch_size and hybrid.eval_windows must be >= 1, hybrid.label_shift and "
                        "hybrid.rollout_every >= 0")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """A training config: a YAML file, or a name shipped in ``na_training/config/train/`` (``cpu``, ``paper``)."""
    try:
        path = resolve_config(path, TRAIN_CONFIG_DIR, "training config")
    except ConfigFileError as err:
        raise ConfigError(str(err)) from None
    raw = load_yaml_mapping(path, ConfigError, "training config")
    raw.update(overrides or {})
    return config_from_dict(raw, str(path))
