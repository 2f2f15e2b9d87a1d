"""NeuralActuator training tools: bag -> NAD conversion, the model, MJX rollout training, evaluation, baselines,
ONNX export (``na-train``). ROS-free."""

import os
from pathlib import Path

# The shipped configs (package data): convert.yaml and train/*.yaml.
CONFIG_DIR = Path(__file__).resolve().parent / "config"
TRAIN_CONFIG_DIR = CONFIG_DIR / "train"

# XLA's newer CPU fusion emitters turn MJX's body-tree kinematics into much slower code as the kinematic chain
# deepens: one SO-101 frame (8 bodies deep) ran ~350x slower than with the classic emitters, an
# OpenManipulator-X frame ~3.6x (src/na_training/benchmarks/bench_xla_cpu_emitters.py). XLA reads XLA_FLAGS
# when its CPU backend starts, after this import; a value the user set for this flag is kept.
CPU_FUSION_FLAG = "--xla_cpu_use_fusion_emitters=false"
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {CPU_FUSION_FLAG}".strip()
