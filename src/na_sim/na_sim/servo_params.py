"""Per-servo physical parameters (``na_sim/config/servo_xm430.yaml``, ``servo_sts3215.yaml``: motor,
gearbox, friction, heat, sensors, with a seeded spread per servo) and the supply an arm's servos share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import yaml

from na_sim.rig_config import SERVO_CONFIG_NAME, RigConfigError, find_config

SERVO_FAMILIES = ("xm430", "sts3215")


@dataclass
class ServoParams:
    """Per-servo physical parameters (arrays of length n), SI units, output-shaft torques."""

    resistance_ohm: np.ndarray
    inductance_h: np.ndarray
    torque_constant_nm_a: np.ndarray
    reference_temperature_c: np.ndarray
    resistance_temp_coeff: np.ndarray
    torque_constant_temp_coeff: np.ndarray
    standby_current_a: np.ndarray
    efficiency_forward: np.ndarray
    efficiency_backward: np.ndarray
    direction_blend_rad_s: np.ndarray
    backlash_arcmin: np.ndarray
    coulomb_nm: np.ndarray
    static_nm: np.ndarray
    stribeck_velocity_rad_s: np.ndarray
    viscous_nm_s_rad: np.ndarray
    viscous_temp_coeff: np.ndarray
    smoothing_velocity_rad_s: np.ndarray
    winding_capacity_j_k: np.ndarray
    housing_capacity_j_k: np.ndarray
    winding_to_housing_k_w: np.ndarray
    housing_to_ambient_k_w: np.ndarray
    sensor_winding_weight: np.ndarray
    control_period_s: np.ndarray
    overload_current_fraction: np.ndarray
    overload_time_s: np.ndarray
    backlash_switch_current_a: np.ndarray
    current_noise_a: np.ndarray
    current_offset_a: np.ndarray
    velocity_noise_rad_s: np.ndarray
    position_noise_pulses: np.ndarray
    voltage_noise_v: np.ndarray
    temperature_noise_c: np.ndarray
    family: str = "xm430"              # servo family: which firmware and control table (make_servo_bank)

    @property
    def n(self) -> int:
        return self.resistance_ohm.shape[0]

    @property
    def backlash_rad(self) -> np.ndarray:
        return np.radians(self.backlash_arcmin / 60.0)

    def worn(self, factors: Sequence[tuple[str, float]]) -> ServoParams:
        """These parameters with each named one multiplied by its factor (a worn or different unit)."""
        names = {f.name for f in fields(self)} - {"family"}
        unknown = sorted(name for name, _ in factors if name not in names)
        if unknown:
            raise RigConfigError(f"follower_wear: unknown servo parameters {unknown}")
        changed = {name: getattr(self, name) * float(factor) for name, factor in factors}
        for name in ("efficiency_forward", "efficiency_backward"):
            if name in changed:
                changed[name] = np.minimum(changed[name], 0.98)
        return replace(self, **changed)

    @classmethod
    def from_yaml(cls, path: str | Path | None = None, n_servos: int = 5, seed: int | None = 0) -> ServoParams:
        """Load ``na_sim/config/servo_xm430.yaml`` and draw each servo's spread from ``seed`` (None: no spread).

        ``current_offset_a`` is the sigma of a per-servo current-sensor offset; the drawn offset
        replaces it in the result.
        """
        path = Path(path) if path is not None else find_config(SERVO_CONFIG_NAME, "servo config")
        if not path.is_file():
            raise RigConfigError(f"servo config not found: {path}")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise RigConfigError(f"{path}: not valid YAML: {exc}") from exc
        spread = raw.pop("spread", {}) or {}
        family = str(raw.pop("family", "xm430"))
        if family not in SERVO_FAMILIES:
            raise RigConfigError(f"{path}: unknown servo family {family!r} (known: {', '.join(SERVO_FAMILIES)})")
        flat: dict[str, float] = {}
        for section, values in raw.items():
            if not isinstance(values, dict):
                raise RigConfigError(f"{path}: section {section!r} must be a mapping")
            flat.update(values)
        names = {f.name for f in fields(cls)} - {"family"}
        missing, unknown = names - flat.keys(), (flat.keys() | spread.keys()) - names
        if missing or unknown:
            raise RigConfigError(f"{path}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
        rng = np.random.default_rng(seed)
        arrays = {}
        for name in sorted(names):
            value = np.full(n_servos, float(flat[name]))
            sigma = float(spread.get(name, 0.0))
            if seed is not None and sigma > 0:
                value *= np.clip(1.0 + sigma * rng.standard_normal(n_servos), 0.5, 1.5)
            arrays[name] = value
        if seed is not None:
            arrays["current_offset_a"] = arrays["current_offset_a"] * rng.standard_normal(n_servos)
        else:
            arrays["current_offset_a"] = np.zeros(n_servos)
        arrays["efficiency_forward"] = np.minimum(arrays["efficiency_forward"], 0.98)
        arrays["efficiency_backward"] = np.minimum(arrays["efficiency_backward"], 0.98)
        params = cls(**arrays, family=family)
        if np.any(params.resistance_ohm <= 0) or np.any(params.torque_constant_nm_a <= 0):
            raise RigConfigError(f"{path}: resistance and torque constant must be positive")
        return params


class SupplyBus:
    """The power supply and cable shared by an arm's servos: voltage sags with total bus current."""

    def __init__(self, voltage: float = 12.0, source_resistance: float = 0.25, filter_time: float = 0.01) -> None:
        self.nominal_voltage = float(voltage)
        self.source_resistance = float(source_resistance)
        self.filter_time = float(filter_time)
        self.current = 0.0
        self.voltage = self.nominal_voltage

    def update(self, total_current: float, dt: float) -> float:
        """Low-pass the bus current (supply regulation) and return the servos' input voltage."""
        alpha = dt / (self.filter_time + dt)
        self.current += alpha * (max(total_current, 0.0) - self.current)
        self.voltage = self.nominal_voltage - self.source_resistance * self.current
        return self.voltage

    def reset(self) -> None:
        self.current, self.voltage = 0.0, self.nominal_voltage
