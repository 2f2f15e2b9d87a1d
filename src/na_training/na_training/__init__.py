"""NeuralActuator training tools: bag -> NAD conversion, the model, MJX rollout training, evaluation, baselines,
ONNX export (``na-train``). ROS-free."""

from pathlib import Path

# The shipped configs (package data): convert.yaml and train/*.yaml.
CONFIG_DIR = Path(__file__).resolve().parent / "config"
TRAIN_CONFIG_DIR = CONFIG_DIR / "train"
