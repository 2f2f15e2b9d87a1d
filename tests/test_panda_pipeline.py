"""The Franka Emika Panda's offline payload pipeline: ``na-sim generate --robot panda`` (the simulated robot's
own controller, no servo bus) -> ``na-train convert --robot panda`` -> ``fit`` with the Panda's loss settings
(vertical force only, per-joint pose weights, velocity loss) -> ``export`` -> ``compare`` beside the classical
observers on the commanded torque."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# The shipped Panda recipe at test size: its loss settings, a short horizon, a tiny model.
TEST_CONFIG = {
    "recipe": "hybrid",
    "model": {"d_model": 16, "num_heads": 2, "d_ff": 32, "num_blocks": 1, "head_hidden": 16},
    "loss": {"force_beta": 0.15, "force_channels": ["z"], "joint_weights": [1, 1, 1, 1, 1.5, 2, 1.5],
             "velocity_weight": 5.0, "gripper_weight": 0.0, "condition_weight": 0.0},
    "optim": {"learning_rate": 1e-3, "warmup_steps": 2, "decay_steps": 100, "ema_decay": 0.9},
    "sim": {"float64": False, "remat": True, "initial_position_noise": 0.02, "position_control": "offset",
            "replay_gripper": True},
    "hybrid": {"batch_size": 64, "label_shift": 0, "torque_weight": 0.0, "rollout_every": 2},
    "batch_size": 2, "steps": 4, "curriculum": [[0, 8]], "seed": 0, "log_every": 1, "eval_every": 100,
    "eval_batches": 1, "checkpoint_every": 100,
}


def run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("panda")
    (root / "config.yaml").write_text(yaml.safe_dump(TEST_CONFIG))
    run(["na_sim.cli", "generate", "--robot", "panda", "--tasks", "payload", "--episodes", "2", "--payloads",
         "300", "--quick", "--max-seconds", "8", "--seed", "11", "--jobs", "1", "--no-progress",
         "--out", str(root / "bags")])
    run(["na_training.cli", "convert", str(root / "bags"), "--robot", "panda", "--out", str(root / "nad"), "--quiet"])
    run(["na_training.cli", "fit", "--config", str(root / "config.yaml"), "--nad", str(root / "nad"), "--out",
         str(root / "run"), "--quiet"])
    run(["na_training.cli", "export", str(root / "run"), "--out", str(root / "model.onnx"), "--nad",
         str(root / "nad")])
    run(["na_training.cli", "compare", "--nad", str(root / "nad"), "--model", str(root / "model.onnx"), "--no-mlp",
         "--out", str(root / "compare")])
    run(["na_training.cli", "eval", str(root / "run"), "--nad", str(root / "nad"), "--horizons", "60", "--plots",
         "0", "--quiet", "--out", str(root / "eval")])
    return root


@pytest.mark.slow
def test_panda_payload_episodes_go_through_the_offline_pipeline(pipeline: Path) -> None:
    assert len(sorted((pipeline / "bags").glob("episode_*"))) == 4
    info = json.loads((pipeline / "nad" / "meta" / "info.json").read_text())
    assert info["robot"] == "panda" and len(info["joint_names"]) == 8
    run_description = json.loads((pipeline / "run" / "run.json").read_text())
    assert run_description["robot"] == "panda"
    comparison = json.loads((pipeline / "compare" / "comparison.json").read_text())
    force = comparison["force_mae"]
    assert {"NeuralActuator", "ID-Linear", "ID-Friction", "GMO"} <= set(force)
    for method, rows in force.items():
        assert set(rows) == {"go_up_stay/300g", "pick_place/300g", "avg"}, method
        # scored on test frames: finite and under the 300 g weight (2.94 N)
        assert all(0.0 < value < 2.94 for value in rows.values()), (method, rows)


@pytest.mark.slow
def test_an_untrained_offset_head_rolls_the_panda_out_along_the_recorded_arm(pipeline: Path) -> None:
    """Four training steps leave the head's outputs near zero; as offsets to the command the PD actuators then
    follow the recorded arm (the Panda's stiff joint impedance tracks its command within a fraction of a degree),
    where targets near zero would swing the arm towards the zero pose, tens of degrees away. The replayed gripper
    is the recording itself."""
    rollout = json.loads((pipeline / "eval" / "eval.json").read_text())["rollout"]["60"]["rows"]
    assert rollout
    for group, row in rollout.items():
        arm = [row[f"panda_joint{k}"] for k in range(1, 8)]
        assert max(arm) < 1.5, (group, arm)                         # degrees
        assert row["gripper"] < 1e-3, (group, row["gripper"])       # mm


@pytest.mark.slow
def test_panda_model_reads_the_commanded_torque_of_eight_channels(pipeline: Path) -> None:
    import onnxruntime

    metadata = onnxruntime.InferenceSession(str(pipeline / "model.onnx")).get_modelmeta().custom_metadata_map
    assert metadata.get("robot") == "panda"
    names = json.loads(metadata["feature_names"])
    assert "load.panda_joint7" in names and "current.panda_joint1" not in names
