"""The ONNX Runtime model wrapper and its inference-variant choice, the estimator core and node, and its latency
benchmarks; the feature and model contract it shares with training live in na_description."""
