"""MJCF models, robot specs, kinematics and rigid-body dynamics of the arms (OpenManipulator-X, SO-101), the servo
control tables and units (DYNAMIXEL XM430-W350, Feetech STS3215) shared by the emulators and the drivers, and the
joint-friction and wear physics shared by training and the estimator."""

from na_description.spec import GripperMap, JointNameError, JointSpec, RobotSpec, SpecError, load_spec

__all__ = ["GripperMap", "JointNameError", "JointSpec", "RobotSpec", "SpecError", "load_spec"]
