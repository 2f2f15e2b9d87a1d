"""The estimator's ROS-free core: input guards, the causal history window, inference, contact
hysteresis and statistics. The node only converts messages to and from this core.

Inputs arrive as their messages carry them: arrays named by ``name``, in any order. They are put in
spec order through the spec's name -> index mapping (:meth:`na_description.RobotSpec.index_of`, remembered
per name list); an input whose names are unknown, missing or duplicated, or whose arrays have another
length than the names, is counted and never estimated on. Stamps are checked against the node's clock
(too old: ``stale_input``; too far ahead: ``future_stamp``), then values (``invalid_input``), before they are
compared with the newest estimated-on stamp (``out_of_order``), so that no refused state can become the newest
stamp and a corrupt state is counted as such however late it arrives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from na_common.diagnostics import OK, WARN, Level
from na_common.latency_stats import LatencyStats
from na_description import JointNameError, RobotSpec
from na_description.features import WINDOW_MAX_GAP_S, FeatureError, HistoryWindow, compute_features
from na_description.servo_tables import input_voltage_range
from na_estimator.input_gaps import InputGaps
from na_estimator.onnx_model import OnnxActuatorModel

# Plausibility bounds of raw inputs (beyond them a reading is treated as corrupt, not estimated on).
# Effort bound per effort signal (the spec's effort_signal): current in A (the XM430 Current Limit register
# tops out at 3.2 A); load as a signed fraction (Feetech Present Load reads at most 1000 x 0.1 %).
EFFORT_LIMIT = {"current": 6.0, "load": 1.05}
VOLTAGE_RANGE_V = (5.0, 20.0)      # V; the XM430 runs on 10-14.8 V, Min/Max Voltage Limit 9.5-16 V (servo
                                   # families; a family record may give its own: servo_tables.input_voltage_range)
TEMPERATURE_RANGE_C = (-20.0, 120.0)
VELOCITY_LIMIT_RAD_S = 30.0        # rad/s; far above the 46 rpm (4.8 rad/s) no-load speed
POSITION_MARGIN_RAD = 0.5          # rad beyond the spec's joint limits
MAX_REMEMBERED_ORDERS = 8          # name lists whose spec-order index is kept (a driver sends one)


@dataclass
class ArmInput:
    """The fields of one follower ArmState the estimator uses (SI), arrays in the order of ``names``."""

    stamp: float                   # s
    names: Sequence[str]           # joint names of the arrays (ArmState.name)
    position: np.ndarray           # rad, joint side (gripper: servo angle)
    gripper_slide: float           # m
    velocity: np.ndarray           # rad/s
    effort: np.ndarray             # the spec's effort signal: current (A) or load (signed fraction)
    input_voltage: np.ndarray      # V
    temperature: np.ndarray        # degC
    stale: np.ndarray | None = None  # per-servo stale flags from the driver

    ARRAYS: ClassVar[tuple[str, ...]] = ("position", "velocity", "effort", "input_voltage", "temperature")


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
    bad_names: int = 0             # names unknown, missing or duplicated, or arrays of another length
    invalid_input: int = 0         # NaN/inf or out-of-range values (ArmState or JointCommand)
    stale_servo: int = 0           # servos the driver marked stale (no fresh reading this cycle)
    stale_input: int = 0           # ArmState older than the stale timeout when it arrived
    future_stamp: int = 0          # ArmState stamped later than the node's clock plus the future tolerance
    out_of_order: int = 0          # stamp not after the previous estimated-on state
    no_command: int = 0            # no (fresh) JointCommand for the goal features yet
    window_resets: int = 0         # gaps that restarted the history window
    invalid_output: int = 0        # the model produced NaN/inf
    missed_inputs: int = 0         # ArmStates that never arrived: stamp gaps (a queue overflowed, a driver stalled)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    @property
    def refused(self) -> int:
        """Inputs not estimated on (window restarts and inputs that never arrived are not refusals)."""
        return sum(v for k, v in self.as_dict().items() if k not in ("estimates", "window_resets", "missed_inputs"))


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
                 future_tolerance: float = 0.02, command_timeout: float = 0.5, max_gap: float = WINDOW_MAX_GAP_S,
                 contact_on: float = 0.6, contact_off: float = 0.4) -> None:
        if not future_tolerance >= 0.0:
            raise ValueError(f"future_tolerance must be >= 0 s, got {future_tolerance}")
        self.spec = spec
        self.stale_timeout = stale_timeout
        self.future_tolerance = future_tolerance
        self.command_timeout = command_timeout
        self.max_gap = max_gap
        self.contact = ContactHysteresis(contact_on, contact_off)
        self.counters = Counters()
        self.gaps = InputGaps()
        self.last_refusal = ""                    # why the latest refused input was refused
        self.latency = LatencyStats()
        self._command: np.ndarray | None = None
        self._command_stamp = -math.inf
        self._last_stamp = -math.inf
        self._orders: dict[tuple[str, ...], np.ndarray | None] = {}
        # Plausible ranges, one row per array of ArmInput.ARRAYS (position, velocity, effort, voltage, temperature).
        lower, upper = spec.servo_angle_limits()
        n = spec.n_motors
        effort_limit = EFFORT_LIMIT[spec.effort_signal]
        voltage = input_voltage_range(spec, VOLTAGE_RANGE_V)
        self._lower = np.stack([lower - POSITION_MARGIN_RAD, np.full(n, -VELOCITY_LIMIT_RAD_S),
                                np.full(n, -effort_limit), np.full(n, voltage[0]),
                                np.full(n, TEMPERATURE_RANGE_C[0])])
        self._upper = np.stack([upper + POSITION_MARGIN_RAD, np.full(n, VELOCITY_LIMIT_RAD_S),
                                np.full(n, effort_limit), np.full(n, voltage[1]),
                                np.full(n, TEMPERATURE_RANGE_C[1])])
        self.set_model(model)

    def set_model(self, model: OnnxActuatorModel) -> None:
        """Use ``model`` from now on (its contract was checked when it loaded); restarts the window and the
        stamp history (the next fresh state is estimated on whatever was stamped before)."""
        self.model = model
        self.window = HistoryWindow(model.contract.feature_mean, model.contract.history_length, self.max_gap)
        self.contact.state = False
        self._last_stamp = -math.inf

    def _refuse(self, counter: str, reason: str) -> None:
        setattr(self.counters, counter, getattr(self.counters, counter) + 1)
        self.last_refusal = reason

    def on_command(self, stamp: float, position: np.ndarray, names: Sequence[str], now: float | None = None) -> bool:
        """The goal the follower tracks (JointCommand: positions named by ``names``); False when refused. With the
        node's clock ``now``, a command stamped more than the future tolerance ahead is refused (future_stamp):
        it would stay "fresh" for the command timeout and stand in for the real commands' goals."""
        if now is not None and stamp - now > self.future_tolerance:
            self._refuse("future_stamp", f"JointCommand stamped {stamp - now:.3f} s ahead of this node's clock "
                                         f"(future_tolerance {self.future_tolerance} s)")
            return False
        try:
            position = np.asarray(position, dtype=float)
            if position.shape != (len(names),):
                raise JointNameError(f"JointCommand position has {position.size} values for {len(names)} joint names")
            order = self._order(names)
            position = position if order is None else position[order]
        except JointNameError as exc:
            self._refuse("bad_names", f"JointCommand: {exc}")
            return False
        if not np.all(np.isfinite(position)):
            self._refuse("invalid_input", "JointCommand: non-finite position")
            return False
        self._command, self._command_stamp = position, stamp
        return True

    def _order(self, names: Sequence[str]) -> np.ndarray | None:
        """The index putting arrays named ``names`` into spec order (None: they are in spec order already);
        raises JointNameError. Remembered per name list: a driver sends the same names every time."""
        key = tuple(names)
        if key in self._orders:
            return self._orders[key]
        index = self.spec.index_of(key)
        order = None if np.array_equal(index, np.arange(len(index))) else index
        if len(self._orders) < MAX_REMEMBERED_ORDERS:
            self._orders[key] = order
        return order

    def _in_spec_order(self, arm: ArmInput) -> ArmInput | None:
        """``arm`` with its arrays in spec order, or None (counted, with the reason) when its names do not fit."""
        n_names = len(arm.names)
        arrays: dict[str, np.ndarray] = {}
        try:
            order = None
            for k, name in enumerate((*ArmInput.ARRAYS, "stale")):
                value = getattr(arm, name)
                if name == "stale" and (value is None or not len(value)):
                    arrays[name] = None
                    continue
                value = np.asarray(value, dtype=bool if name == "stale" else float)
                if value.shape != (n_names,):
                    raise JointNameError(f"{name} has {value.size} values for {n_names} joint names")
                if k == 0:
                    order = self._order(arm.names)
                arrays[name] = value if order is None else value[order]
        except JointNameError as exc:
            self._refuse("bad_names", f"ArmState: {exc}")
            return None
        return ArmInput(stamp=arm.stamp, names=self.spec.joint_names, gripper_slide=arm.gripper_slide, **arrays)

    def _valid(self, arm: ArmInput) -> bool:
        values = np.stack([arm.position, arm.velocity, arm.effort, arm.input_voltage, arm.temperature])
        if values.shape != self._lower.shape or not math.isfinite(arm.gripper_slide):
            return False
        # NaN fails both comparisons, and inf is beyond every bound.
        return bool(np.all((values >= self._lower) & (values <= self._upper)))

    def on_arm_state(self, arm: ArmInput, now: float) -> Estimate | None:
        """An estimate for this state, or None (and a counter) when it must not be estimated on."""
        arm = self._in_spec_order(arm)
        if arm is None:
            return None
        # Stamps are checked against the clock before the history: a state from the future must never
        # become the latest stamp, or every real state after it would be refused as out of order.
        if arm.stamp - now > self.future_tolerance:
            self._refuse("future_stamp", f"ArmState stamped {arm.stamp - now:.3f} s ahead of this node's clock "
                                         f"(future_tolerance {self.future_tolerance} s)")
            return None
        self.counters.missed_inputs += self.gaps.observe(arm.stamp)
        if now - arm.stamp > self.stale_timeout:
            self._refuse("stale_input", f"ArmState {now - arm.stamp:.3f} s old on arrival "
                                        f"(stale_timeout {self.stale_timeout} s)")
            return None
        # Values before order: a corrupt state counts as invalid whatever its stamp (one that reached this node
        # after a newer real state would otherwise hide among the out-of-order duplicates).
        if not self._valid(arm):
            self._refuse("invalid_input", "ArmState values non-finite or out of range")
            return None
        if arm.stamp <= self._last_stamp:
            self._refuse("out_of_order", "ArmState stamped at or before the previous one")
            return None
        if arm.stale is not None and np.any(arm.stale):
            stale = [name for name, flag in zip(self.spec.joint_names, arm.stale, strict=True) if flag]
            self._refuse("stale_servo", f"ArmState: the driver marked {stale} stale")
            return None
        if self._command is None or arm.stamp - self._command_stamp > self.command_timeout:
            self._refuse("no_command", f"no JointCommand within command_timeout {self.command_timeout} s")
            return None
        self._last_stamp = arm.stamp
        try:
            frame = compute_features(self._command, arm.position[: self.spec.n_arm], np.asarray(arm.gripper_slide),
                                     arm.effort, arm.velocity, arm.input_voltage, arm.temperature, spec=self.spec)
        except FeatureError as exc:
            self._refuse("invalid_input", f"ArmState: {exc}")
            return None
        resets = self.window.resets
        window = self.window.push(frame, arm.stamp)          # restarts itself after a gap > max_gap
        self.counters.window_resets += self.window.resets - resets
        outputs, latency = self.model.infer(window)
        if not all(np.isfinite(v).all() for v in outputs.values()):
            self._refuse("invalid_output", "the model produced a non-finite output")
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

    def status(self) -> tuple[Level, str]:
        """Diagnostic level and message: WARN once any input was refused, with the latest reason."""
        refused = self.counters.refused
        message = f"{self.counters.estimates} estimates, {refused} inputs refused"
        if self.counters.missed_inputs:
            message += (f", {self.counters.missed_inputs} never arrived ({self.gaps.gaps} gaps, longest "
                        f"{self.gaps.longest_gap * 1e3:.0f} ms)")
        if refused:
            return WARN, f"{message}; last: {self.last_refusal}"
        return OK, message
