"""Classical baselines (ID-Linear, ID-Friction, momentum observer, condition classifiers) and the shared metrics."""
