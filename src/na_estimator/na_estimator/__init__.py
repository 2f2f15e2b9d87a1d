"""The feature contract shared with training, the ONNX Runtime model wrapper, the estimator node and its latency benchmark."""
