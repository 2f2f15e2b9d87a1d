"""Scene additions to a robot's MJCF shared by the simulated arms (the servo rig and the torque arm), ROS-free:
the payload body at the tool point, and compiling an edited spec through ``load_model`` (the spec's limits)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import mujoco
import numpy as np

from na_description.model import load_model
from na_description.spec import RobotSpec


def add_payload_body(mj: mujoco.MjSpec, spec: RobotSpec, offset: np.ndarray, radius: float, **geom) -> None:
    """A massless body named ``payload`` at the tool site plus ``offset`` (m), a sphere of ``radius`` that touches
    nothing; a grasp gives it the held mass (``model.body_mass``)."""
    tool = mj.site(spec.tool_site)
    payload = tool.parent.add_body(name="payload", pos=list(np.asarray(tool.pos) + offset))
    # Its centre of mass at its origin, said outright: with inertiafromgeom="false" (the spec MJCFs) and no
    # inertial of its own, the compiler put the inertial frame at the body's offset from its parent, so a
    # held mass sat that far again beyond the tool (10 cm on the SO-101, 12.6 cm on the OpenManipulator-X).
    payload.ipos = [0.0, 0.0, 0.0]
    payload.add_geom(name="payload_geom", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0], contype=0,
                     conaffinity=0, group=3, **geom)


def compile_edited(mj: mujoco.MjSpec, spec: RobotSpec, prefix: str, **load_options) -> mujoco.MjModel:
    """Compile an edited copy of the spec's MJCF through ``load_model`` (joint limits and effort bounds applied)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        path = Path(tmp) / spec.mjcf_path.name
        path.write_text(mj.to_xml())
        return load_model(dataclasses.replace(spec, mjcf_path=path), **load_options)
