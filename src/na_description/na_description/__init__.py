"""MJCF model, robot spec and kinematics of the OpenManipulator-X arms, and the DYNAMIXEL
XM430-W350 control table and units shared by the emulator and the driver."""

from na_description.spec import GripperMap, JointNameError, JointSpec, RobotSpec, SpecError, load_spec

__all__ = ["GripperMap", "JointNameError", "JointSpec", "RobotSpec", "SpecError", "load_spec"]
