"""Force-aware behaviour-cloning policies fed by the NeuralActuator estimator."""
