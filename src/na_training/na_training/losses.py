"""Training losses (paper Eq. 13-18, Appendix B-a; docs/REFERENCES.md, Authors' setup).

L = w_pos (L_arm + w_grip L_grip) + w_force L_force + w_gate L_gate + w_cond L_cond with Smooth-L1 on the
arm joints (rad) and the gripper slide (mm), a Huber force loss with nonzero-force up-weighting and a
per-channel validity mask, BCE on the contact gate and on the supervised joint's condition score.
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


def rollout_losses(outputs: dict[str, jax.Array], batch: dict[str, jax.Array], config: LossConfig, n_arm: int,
                   condition_channel: int) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Total loss and its parts for one rollout batch (outputs of :func:`na_training.rollout.rollout`)."""
    error = outputs["qpos"] - batch["target_qpos"]
    arm = jnp.mean(smooth_l1(error[..., :n_arm], 1.0))
    gripper_mm = jnp.mean(smooth_l1(error[..., n_arm:] * METRES_TO_MM, 1.0))

    force_label = batch["force"]
    valid = batch["force_valid"].astype(force_label.dtype)
    if not config.mask_invalid_force:
        valid = jnp.ones_like(valid)
    labelled = force_label * valid
    nonzero = jnp.linalg.norm(labelled, axis=-1) > config.contact_threshold
    sample_weight = jnp.where(nonzero, config.nonzero_force_weight, 1.0)[..., None]
    huber = smooth_l1(outputs["force"] - force_label, config.force_beta)
    force = jnp.sum(sample_weight * valid * huber) / jnp.maximum(jnp.sum(valid), 1.0)

    frame_has_label = jnp.any(valid > 0, axis=-1).astype(force_label.dtype)
    gate = _masked_mean(bce_with_logits(outputs["contact_logit"][..., 0], nonzero.astype(force_label.dtype)),
                        frame_has_label)
    condition_mask = batch["condition_mask"].astype(force_label.dtype)
    condition = _masked_mean(bce_with_logits(outputs["condition_logit"][..., condition_channel],
                                             batch["condition"]), condition_mask)

    total = (config.position_weight * (arm + config.gripper_weight * gripper_mm) + config.force_weight * force
             + config.gate_weight * gate + config.condition_weight * condition)
    parts = {"loss": total, "arm": arm, "gripper_mm": gripper_mm, "force": force, "gate": gate,
             "condition": condition, "force_mae": _masked_mean(jnp.abs(outputs["force"] - force_label), valid),
             "arm_mae_rad": jnp.mean(jnp.abs(error[..., :n_arm]))}
    return total, parts
