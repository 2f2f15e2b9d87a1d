"""Episode bags: one rosbag2 directory (MCAP) per recorded episode, plus its metadata.

The one implementation of the layout in docs/INTERFACES.md ("Episode bags"), shared by the
live recorder node, ``na-sim generate`` and the bag -> NAD converter. ROS-free: bag I/O and
message (de)serialisation go through ``rosbags`` with a ROS 2 Jazzy type store to which the
``na_msgs`` types are added from their ``.msg`` files.

Layout::

    OUT/episode_000001/
      episode_000001_0.mcap   rosbag2 MCAP
      metadata.yaml           rosbag2 metadata; custom_data holds the episode metadata
      episode.json            the same metadata (sidecar, written first, updated on close)

One module per job: ``layout`` (folders, sidecar, ``metadata.yaml``), ``metadata`` (keys, checks,
``custom_data``), ``messages`` (type store, message building), ``writer``, ``reader`` and ``raw`` (CDR bytes
without deserialising). The names most callers use are importable from here too.
"""

from na_common.episode_bag.layout import EpisodeBagError, list_episodes, read_rosbag2_info, topic_summaries
from na_common.episode_bag.messages import (
    ARM_STATE,
    BOOL,
    JOINT_COMMAND,
    JOINT_STATE,
    WRENCH_STAMPED,
    make_header,
    message_class,
    serialize,
    stamp_to_ns,
    typestore,
)
from na_common.episode_bag.metadata import (
    FORCE_SOURCES,
    NOMINAL_CONDITION,
    episode_metadata,
    restricted_condition,
    validate_metadata,
)
from na_common.episode_bag.raw import RawMessages, read_raw_messages
from na_common.episode_bag.reader import EpisodeReader
from na_common.episode_bag.writer import EpisodeWriter

__all__ = [
    "ARM_STATE",
    "BOOL",
    "FORCE_SOURCES",
    "JOINT_COMMAND",
    "JOINT_STATE",
    "NOMINAL_CONDITION",
    "WRENCH_STAMPED",
    "EpisodeBagError",
    "EpisodeReader",
    "EpisodeWriter",
    "RawMessages",
    "episode_metadata",
    "list_episodes",
    "make_header",
    "message_class",
    "read_raw_messages",
    "read_rosbag2_info",
    "restricted_condition",
    "serialize",
    "stamp_to_ns",
    "topic_summaries",
    "typestore",
    "validate_metadata",
]
