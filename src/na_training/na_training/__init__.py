"""Bag to NAD conversion, the NeuralActuator model in JAX/Flax, MJX rollout training, evaluation, classical baselines and ONNX export (CLI na-train)."""
