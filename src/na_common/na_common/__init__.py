"""Shared, ROS-free building blocks of the NeuralActuator suite (``ros_node`` is the one rclpy module)."""
