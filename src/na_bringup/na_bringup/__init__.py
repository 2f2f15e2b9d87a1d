"""Bring-up of the NeuralActuator rig: launch files, parameter files, na-launch, the live-graph helpers, na-demo."""
