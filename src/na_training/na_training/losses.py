"""Training losses (paper Eq. 13-18, Appendix B-a).

L = w_pos (L_arm + w_grip L_grip) + w_force L_force + w_gate L_gate + w_cond L_cond with Smooth-L1 on the
arm joints (rad) and the gripper slide (mm), a Huber force loss with nonzero-force up-weighting and a
per-channel validity mask, BCE on the contact gate and on the supervised joint's condition score.

Two places use the head terms (:func:`head_losses`, one implementation): the rollout
(:func:`rollout_losses`, the paper's form, heads fed with simulated-state windows) and the recorded
windows (:func:`supervised_losses`, heads fed exactly as the deployed estimator feeds them), which can
also carry the inverse-dynamics warm start of the torque head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from na_training.config import LossConfig

METRES_TO_MM = 1000.0   # kappa_g (paper Eq. 14)


def smooth_l1(error: jax.Array, beta: float) -> jax.Array:
    """Elementwise Smooth-L1 / Huber_beta: 0.5 e^2 / beta below beta, |e| - 0.5 beta above."""
    magnitude = jnp.abs(error)
    return jnp.where(magnitude < beta, 0.5 * error**2 / beta, magnitude - 0.5 * beta)


def bce_with_logits(logits: jax.Array, targets: jax.Array) -> jax.Array:
    return jnp.maximum(logits, 0) - logits * targets + jnp.log1p(jnp.exp(-jnp.abs(logits)))


def _masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def head_losses(outputs: dict[str, jax.Array], labels: dict[str, jax.Array], gate_target: jax.Array | None,
                config: LossConfig, condition_channel: int) -> dict[str, jax.Array]:
    """Force (Huber on the gated force, nonzero labels up-weighted, invalid channels masked), gate BCE and
    condition BCE for outputs/labels of any leading shape. ``gate_target`` None: |f| > contact_threshold
    on the labelled force (paper Sec. III-D)."""
    force_label = labels["force"].astype(jnp.float32)
    valid = labels["force_valid"].astype(jnp.float32)
    if not config.mask_invalid_force:
        valid = jnp.ones_like(valid)
    valid = valid * jnp.asarray([float(axis in config.force_channels) for axis in "xyz"], jnp.float32)
    labelled = force_label * valid
    nonzero = jnp.linalg.norm(labelled, axis=-1) > config.contact_threshold
    sample_weight = jnp.where(nonzero, config.nonzero_force_weight, 1.0)[..., None]
    predicted = outputs["force"].astype(jnp.float32)
    huber = smooth_l1(predicted - force_label, config.force_beta)
    force = jnp.sum(sample_weight * valid * huber) / jnp.maximum(jnp.sum(valid), 1.0)
    target = nonzero if gate_target is None else gate_target
    frame_has_label = jnp.any(valid > 0, axis=-1).astype(jnp.float32)
    gate = _masked_mean(bce_with_logits(outputs["contact_logit"][..., 0].astype(jnp.float32),
                                        target.astype(jnp.float32)), frame_has_label)
    condition_mask = labels["condition_mask"].astype(jnp.float32)
    condition_label = labels["condition"].astype(jnp.float32)
    condition_bce = bce_with_logits(outputs["condition_logit"][..., condition_channel].astype(jnp.float32),
                                    condition_label)
    share = config.condition_restricted_share
    if share > 0:        # class-balanced: restricted frames (label 0) carry ``share`` of the term, nominal the rest
        condition = ((1.0 - share) * _masked_mean(condition_bce, condition_mask * condition_label)
                     + share * _masked_mean(condition_bce, condition_mask * (1.0 - condition_label)))
    else:
        condition = _masked_mean(condition_bce, condition_mask)
    return {"force": force, "gate": gate, "condition": condition,
            "force_mae": _masked_mean(jnp.abs(predicted - force_label), valid)}


def pose_losses(qpos: jax.Array, target_qpos: jax.Array, n_arm: int, gripper_scale: float = METRES_TO_MM,
                joint_weights: tuple[float, ...] = ()) -> dict[str, jax.Array]:
    """Smooth-L1 (beta 1) on the arm joints (rad), weighted per joint by ``joint_weights`` normalised to mean 1
    (() = equal), and the gripper coordinate times ``gripper_scale`` (slide in mm by default, paper Eq. 13-14)."""
    error = qpos - target_qpos
    weights = jnp.ones(n_arm) if not joint_weights else jnp.asarray(joint_weights, jnp.float32)
    weights = weights / jnp.mean(weights)
    return {"arm": jnp.mean(smooth_l1(error[..., :n_arm], 1.0) * weights),
            "gripper_mm": jnp.mean(smooth_l1(error[..., n_arm:] * gripper_scale, 1.0)),
            "arm_mae_rad": jnp.mean(jnp.abs(error[..., :n_arm]))}


def velocity_loss(qpos: jax.Array, target_qpos: jax.Array, start_qpos: jax.Array, frame_period: float
                  ) -> jax.Array:
    """Smooth-L1 (beta 1) between finite-difference velocities (rad/s) of the rolled-out and the recorded poses
    ``[B, H, n]`` (the frame before both: ``start_qpos [B, n]``), over every joint."""
    def velocity(sequence: jax.Array) -> jax.Array:
        previous = jnp.concatenate([start_qpos[:, None, :], sequence[:, :-1]], axis=1)
        return (sequence - previous) / frame_period
    return jnp.mean(smooth_l1(velocity(qpos) - velocity(target_qpos), 1.0))


def rollout_losses(outputs: dict[str, jax.Array], batch: dict[str, jax.Array], config: LossConfig, n_arm: int,
                   condition_channel: int, heads: bool = True, frame_period: float = 1.0
                   ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Total loss and its parts for one rollout batch (outputs of :func:`na_training.rollout.rollout`).

    ``heads`` False: the pose terms only (the rollout then trains just the torque surrogate). ``frame_period``
    (s) scales the finite-difference velocities of the velocity term (``config.velocity_weight`` > 0)."""
    parts = pose_losses(outputs["qpos"], batch["target_qpos"], n_arm, config.gripper_scale, config.joint_weights)
    total = config.position_weight * (parts["arm"] + config.gripper_weight * parts["gripper_mm"])
    if config.velocity_weight > 0:
        parts["velocity"] = velocity_loss(outputs["qpos"], batch["target_qpos"], batch["qpos0"], frame_period)
        total = total + config.velocity_weight * parts["velocity"]
    if heads:
        parts |= head_losses(outputs, batch, None, config, condition_channel)
        total = (total + config.force_weight * parts["force"] + config.gate_weight * parts["gate"]
                 + config.condition_weight * parts["condition"])
    return total, {"loss": total, **parts}


def torque_loss(predicted: jax.Array, label: jax.Array, valid: jax.Array, bounds: jax.Array) -> jax.Array:
    """Smooth-L1 (beta 0.05) on the torque error in units of each channel's effort bound."""
    error = (predicted - label) / bounds
    mask = jnp.broadcast_to(valid[..., None], error.shape).astype(jnp.float32)
    return _masked_mean(smooth_l1(error, 0.05), mask)


def supervised_losses(outputs: dict[str, jax.Array], batch: dict[str, jax.Array], config: LossConfig,
                      condition_channel: int, torque_weight: float = 0.0, effort_bounds: jax.Array | None = None
                      ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Direct losses of the heads on recorded windows (batches of :class:`na_training.windows.RecordedWindows`):
    force, gate (target: the batch's ``contact``), condition, and the inverse-dynamics torque term when
    ``torque_weight`` > 0."""
    parts = head_losses(outputs, batch, batch["contact"], config, condition_channel)
    total = (config.force_weight * parts["force"] + config.gate_weight * parts["gate"]
             + config.condition_weight * parts["condition"])
    if torque_weight > 0:
        parts["torque"] = torque_loss(outputs["torque_surrogate"], batch["torque"], batch["torque_valid"],
                                      effort_bounds)
        total = total + torque_weight * parts["torque"]
    return total, {"loss": total, **parts}
