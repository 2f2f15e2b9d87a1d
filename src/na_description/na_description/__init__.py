"""MJCF models, robot specs and kinematics of the arms (OpenManipulator-X, SO-101), and the servo
control tables and units (DYNAMIXEL XM430-W350, Feetech STS3215) shared by the emulators and the drivers."""

from na_description.spec import GripperMap, JointNameError, JointSpec, RobotSpec, SpecError, load_spec

__all__ = ["GripperMap", "JointNameError", "JointSpec", "RobotSpec", "SpecError", "load_spec"]
