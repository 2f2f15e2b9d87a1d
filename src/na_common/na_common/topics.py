"""Topic and service names of the suite: the one place they are spelled (docs/INTERFACES.md lists them).

Drivers publish relative names inside their namespace (``/leader``, ``/follower``, ``/ft``), so the
same executable serves both arms; the absolute names below are what those relative names resolve
to with the namespaces the launch files give. Everything else uses the absolute names.
"""

from __future__ import annotations

# Namespaces of the driver nodes (launch files put each driver in one).
LEADER_NS = "/leader"
FOLLOWER_NS = "/follower"
FT_NS = "/ft"

# The arm driver's node name (one in each arm's namespace) and its services, relative to the node.
ARM_DRIVER_NODE = "arm_driver"
REBOOT_SERVICE = "reboot"        # std_srvs/Trigger: reboot tripped servos, a follower re-arms torque at its pose
TORQUE_SERVICE = "torque"        # std_srvs/SetBool
LEADER_DRIVER = f"{LEADER_NS}/{ARM_DRIVER_NODE}"
FOLLOWER_DRIVER = f"{FOLLOWER_NS}/{ARM_DRIVER_NODE}"
FOLLOWER_REBOOT = f"{FOLLOWER_DRIVER}/{REBOOT_SERVICE}"

# Names relative to a driver's namespace.
ARM_STATE = "arm_state"          # na_msgs/ArmState, one bus read of all servos
JOINT_STATES = "joint_states"    # sensor_msgs/JointState, for RViz
COMMAND = "command"              # na_msgs/JointCommand, goals of a follower arm
WRENCH = "wrench"                # geometry_msgs/WrenchStamped of the F/T driver

LEADER_ARM_STATE = f"{LEADER_NS}/{ARM_STATE}"
LEADER_JOINT_STATES = f"{LEADER_NS}/{JOINT_STATES}"
FOLLOWER_ARM_STATE = f"{FOLLOWER_NS}/{ARM_STATE}"
FOLLOWER_JOINT_STATES = f"{FOLLOWER_NS}/{JOINT_STATES}"
FOLLOWER_COMMAND = f"{FOLLOWER_NS}/{COMMAND}"
FT_WRENCH = f"{FT_NS}/{WRENCH}"

GRASP = "/episode/grasp"                 # std_msgs/Bool, true while a payload is held
TRUTH_WRENCH = "/sim/truth/wrench"       # simulated rig only: force on the tool, base frame
TRUTH_CONTACT = "/sim/truth/contact"     # simulated rig only
DIAGNOSTICS = "/diagnostics"             # diagnostic_msgs/DiagnosticArray of drivers, estimator, teleop, policy

ESTIMATOR_NS = "/estimator"
ESTIMATE = f"{ESTIMATOR_NS}/estimate"
ESTIMATED_FORCE = f"{ESTIMATOR_NS}/force"
ESTIMATED_CONTACT = f"{ESTIMATOR_NS}/contact"
ESTIMATED_CONDITION = f"{ESTIMATOR_NS}/condition"
ESTIMATED_TORQUE = f"{ESTIMATOR_NS}/torque"
ESTIMATE_MARKER = f"{ESTIMATOR_NS}/marker"

# The recorder node's name: its services ~/start, ~/stop, ~/discard and its status topic ~/status (String).
RECORDER_NODE = "/recorder"

# Message types (rosbag2 spelling) of the topics an episode bag holds.
ARM_STATE_TYPE = "na_msgs/msg/ArmState"
JOINT_COMMAND_TYPE = "na_msgs/msg/JointCommand"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
WRENCH_STAMPED_TYPE = "geometry_msgs/msg/WrenchStamped"
BOOL_TYPE = "std_msgs/msg/Bool"

# Topic -> message type of everything the recorder records by default and the generator writes.
EPISODE_TOPICS: dict[str, str] = {
    LEADER_ARM_STATE: ARM_STATE_TYPE,
    FOLLOWER_ARM_STATE: ARM_STATE_TYPE,
    LEADER_JOINT_STATES: JOINT_STATE_TYPE,
    FOLLOWER_JOINT_STATES: JOINT_STATE_TYPE,
    FOLLOWER_COMMAND: JOINT_COMMAND_TYPE,
    FT_WRENCH: WRENCH_STAMPED_TYPE,
    GRASP: BOOL_TYPE,
    TRUTH_WRENCH: WRENCH_STAMPED_TYPE,
    TRUTH_CONTACT: BOOL_TYPE,
}
