"""The estimator's ROS-free core: input guards, the causal history window, inference, contact
hysteresis and statistics. The node only converts messages to and from this core."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from na_description import RobotSpec
from na_estimator.features import FeatureError, HistoryWindow, compute_features
from na_estimator.onnx_model import OnnxActuatorModel

# Plausibility bounds of raw inputs (beyond them a reading is treated as corrupt, not estimated on).
CURRENT_LIMIT_A = 6.0              # A; the XM430 Current Limit register tops out at 3.2 A
VOLTAGE_RANGE_V = (5.0, 20.0)      # V; the XM430 runs on 10-14.8 V, Min/Max Voltage Limit 9.5-16 V
TEMPERATURE_RANGE_C = (-20.0, 120.0)
VELOCITY_LIMIT_RAD_S = 30.0        # rad/s; far above the 46 rpm (4.8 rad/s) no-load speed
POSITION_MARGIN_RAD = 0.5          # rad beyond the spec's joint limits


@dataclass
class ArmInput:
    """The fields of one follower ArmState the estimator uses (SI, spec order)."""

    stamp: float                   # s
    position: np.ndarray           # rad, joint side (gripper: servo angle)
    gripper_slide: float           # m
    velocity: np.ndarray           # rad/s
    current: np.ndarray            # A
    input_voltage: np.ndarray      # V
    temperature: np.ndarray        # degC
    stale: np.ndarray | None = None  # per-servo stale flags from the driver


@dataclass
class Estimate:
    stamp: float
    torque_surrogate: np.ndarray   # clipped to the model's effort bounds
    force_raw: np.ndarray
    force: np.ndarray
    contact_probability: float
    in_contact: bool
    condition: np.ndarray
    latency: float                 # s, inference wall time
    window_fill: int


@dataclass
class Counters:
    estimates: int = 0
    invalid_input: int = 0         # NaN/inf or out-of-range values, or driver-marked stale servos
    stale_input: int = 0           # ArmState older than the stale timeout when it arrived
    out_of_order: int = 0          # stamp not after the previous one
    no_command: int = 0            # no (fresh) JointCommand for the goal features yet
    window_resets: int = 0         # gaps that restarted the history window
    invalid_output: int = 0        # the model produced NaN/inf

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class LatencyStats:
    """Inference latencies of the most recent estimates (s)."""

    samples: deque = field(default_factory=lambda: deque(maxlen=2000))

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)

    def percentile(self, q: float) -> float:
        return float(np.percentile(np.fromiter(self.samples, float), q)) if self.samples else math.nan


class ContactHysteresis:
    """Contact switches on above ``on`` and off below ``off`` (``off`` <= ``on``)."""

    def __init__(self, on: float, off: float) -> None:
        if not 0.0 <= off <= on <= 1.0:
            raise ValueError(f"contact thresholds need 0 <= off ({off}) <= on ({on}) <= 1")
        self.on, self.off, self.state = on, off, False

    def update(self, probability: float) -> bool:
        if self.state and probability < self.off:
            self.state = False
        elif not self.state and probability > self.on:
            self.state = True
        return self.state


class EstimatorCore:
    """Strictly causal, event-driven: one estimate per valid follower state, none from bad input."""

    def __init__(self, model: OnnxActuatorModel, spec: RobotSpec, *, stale_timeout: float = 0.1,
                 command_timeout: float = 0.5, max_gap: float = 0.1, contact_on: float = 0.6,
                 contact_off: float = 0.4) -> None:
        self.spec = spec
        self.stale_timeout = stale_timeout
        self.command_timeout = command_timeout
        self.max_gap = max_gap
        self.contact = ContactHysteresis(contact_on, contact_off)
        self.counters = Counters()
        self.latency = LatencyStats()
        self._command: np.ndarray | None = None
        self._command_stamp = -math.inf
        self._last_stamp = -math.inf
        lower, upper = spec.servo_angle_limits()
        self._position_bounds = (lower - POSITION_MARGIN_RAD, upper + POSITION_MARGIN_RAD)
        self.set_model(model)

    def set_model(self, model: OnnxActuatorModel) -> None:
        """Use ``model`` from now on (its contract was checked when it loaded); restarts the window."""
        self.model = model
        self.window = HistoryWindow(model.contract.feature_mean, model.contract.history_length, self.max_gap)
        self.contact.state = False

    def on_command(self, stamp: float, position: np.ndarray) -> bool:
        position = np.asarray(position, dtype=float)
        if position.shape != (self.spec.n_motors,) or not np.all(np.isfinite(position)):
            self.counters.invalid_input += 1
            return False
        self._command, self._command_stamp = position, stamp
        return True

    def _valid(self, arm: ArmInput) -> bool:
        n = self.spec.n_motors
        arrays = (arm.position, arm.velocity, arm.current, arm.input_voltage, arm.temperature)
        if any(np.shape(a) != (n,) for a in arrays):
            return False
        if not all(np.all(np.isfinite(a)) for a in arrays) or not math.isfinite(arm.gripper_slide):
            return False
        if arm.stale is not None and np.any(arm.stale):
            return False
        low, high = self._position_bounds
        return bool(np.all((arm.position >= low) & (arm.position <= high))
                    and np.all(np.abs(arm.current) <= CURRENT_LIMIT_A)
                    and np.all(np.abs(arm.velocity) <= VELOCITY_LIMIT_RAD_S)
                    and np.all((arm.input_voltage >= VOLTAGE_RANGE_V[0]) & (arm.input_voltage <= VOLTAGE_RANGE_V[1]))
                    and np.all((arm.temperature >= TEMPERATURE_RANGE_C[0])
                               & (arm.temperature <= TEMPERATURE_RANGE_C[1])))

    def on_arm_state(self, arm: ArmInput, now: float) -> Estimate | None:
        """An estimate for this state, or None (and a counter) when it must not be estimated on."""
        if arm.stamp <= self._last_stamp:
            self.counters.out_of_order += 1
            return None
        if now - arm.stamp > self.stale_timeout:
            self.counters.stale_input += 1
            return None
        if not self._valid(arm):
            self.counters.invalid_input += 1
            return None
        if self._command is None or arm.stamp - self._command_stamp > self.command_timeout:
            self.counters.no_command += 1
            return None
        self._last_stamp = arm.stamp
        try:
            frame = compute_features(self._command, arm.position[: self.spec.n_arm], np.asarray(arm.gripper_slide),
                                     arm.current, arm.velocity, arm.input_voltage, arm.temperature, spec=self.spec)
        except FeatureError:
            self.counters.invalid_input += 1
            return None
        resets = self.window.resets
        window = self.window.push(frame, arm.stamp)          # restarts itself after a gap > max_gap
        self.counters.window_resets += self.window.resets - resets
        outputs, latency = self.model.infer(window)
        if not all(np.all(np.isfinite(v)) for v in outputs.values()):
            self.counters.invalid_output += 1
            return None
        self.latency.add(latency)
        self.counters.estimates += 1
        probability = float(outputs["contact_prob"].reshape(-1)[0])
        bounds = self.model.contract.effort_bounds
        return Estimate(
            stamp=arm.stamp,
            torque_surrogate=np.clip(outputs["torque_surrogate"].astype(float), -bounds, bounds),
            force_raw=outputs["force_raw"].astype(float),
            force=outputs["force"].astype(float),
            contact_probability=probability,
            in_contact=self.contact.update(probability),
            condition=outputs["condition"].astype(float),
            latency=latency,
            window_fill=self.window.filled,
        )
