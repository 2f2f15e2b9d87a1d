"""The trained policy as one ``.npz`` file, and its forward pass in numpy (ROS-free, no JAX).

The file holds the MLP's dense layers (``kernel_K``/``bias_K``, Flax layout), the observation and action
normalisation and a JSON header (variant, chunk, joint names, rate, training summary). The policy node
runs :meth:`Policy.act` at 60 Hz; :mod:`na_policy.train` checks it against the Flax model it exports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from na_policy.features import check_variant, observation_size

FORMAT = "na_policy/mlp-chunk/1"


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the problem."""


@dataclass
class Policy:
    variant: str
    chunk: int
    joint_names: list[str]
    kernels: list[np.ndarray]
    biases: list[np.ndarray]
    obs_mean: np.ndarray
    obs_std: np.ndarray
    act_mean: np.ndarray          # (chunk * 5,)
    act_std: np.ndarray
    start_pose: np.ndarray        # (joints,) where the demonstrations began (the node moves there first)
    rate_hz: float = 60.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    def act_chunk(self, obs: np.ndarray) -> np.ndarray:
        """Action chunk (chunk, joints) for one observation: commands relative to the measured position."""
        h = (np.asarray(obs, dtype=np.float32) - self.obs_mean) / self.obs_std
        last = len(self.kernels) - 1
        for k, (kernel, bias) in enumerate(zip(self.kernels, self.biases, strict=True)):
            h = h @ kernel + bias
            if k < last:
                h = np.maximum(h, 0.0)
        return (h * self.act_std + self.act_mean).reshape(self.chunk, self.n_joints)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "variant": self.variant, "chunk": self.chunk, "joint_names": self.joint_names,
                  "rate_hz": self.rate_hz, "layers": len(self.kernels), "info": self.info}
        arrays = {f"kernel_{k}": w for k, w in enumerate(self.kernels)}
        arrays |= {f"bias_{k}": b for k, b in enumerate(self.biases)}
        with path.open("wb") as handle:
            np.savez(handle, header=np.array(json.dumps(header)), obs_mean=self.obs_mean, obs_std=self.obs_std,
                     act_mean=self.act_mean, act_std=self.act_std, start_pose=self.start_pose, **arrays)
        return path


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"policy file not found: {path} (train one with na-policy train)")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header.get("format") != FORMAT:
                raise PolicyFileError(f"{path} is not a policy file of this version (format {header.get('format')!r}, "
                                      f"expected {FORMAT!r})")
            layers = int(header["layers"])
            policy = Policy(variant=header["variant"], chunk=int(header["chunk"]),
                            joint_names=list(header["joint_names"]),
                            kernels=[data[f"kernel_{k}"].astype(np.float32) for k in range(layers)],
                            biases=[data[f"bias_{k}"].astype(np.float32) for k in range(layers)],
                            obs_mean=data["obs_mean"].astype(np.float32), obs_std=data["obs_std"].astype(np.float32),
                            act_mean=data["act_mean"].astype(np.float32), act_std=data["act_std"].astype(np.float32),
                            start_pose=data["start_pose"].astype(float),
                            rate_hz=float(header["rate_hz"]), info=dict(header.get("info", {})))
    except PolicyFileError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise PolicyFileError(f"cannot read policy file {path}: {exc}") from exc
    check_variant(policy.variant)
    if policy.kernels[0].shape[0] != observation_size(policy.variant):
        raise PolicyFileError(f"{path}: first layer takes {policy.kernels[0].shape[0]} inputs, variant "
                              f"'{policy.variant}' has {observation_size(policy.variant)}")
    if policy.kernels[-1].shape[1] != policy.chunk * policy.n_joints:
        raise PolicyFileError(f"{path}: last layer gives {policy.kernels[-1].shape[1]} outputs, expected "
                              f"{policy.chunk} x {policy.n_joints}")
    return policy
