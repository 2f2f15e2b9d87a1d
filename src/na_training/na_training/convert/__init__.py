"""``na-train convert``: rosbag2 episode bags -> Neural Actuation Dataset v1 (``src/na_training/NAD.md``).

Per episode: read the follower, leader, command, F/T, grasp and (simulated rig) truth streams,
align them to the follower samples (or to a uniform grid with ``--rate``/``--frame-period``) by
header stamp, make the force/contact/condition labels (``na_training.labels``) and write one Parquet file.

One module per job: ``config`` (defaults, YAML, checks), ``streams`` (CDR messages -> stamped arrays),
``bag`` (one bag's metadata and streams), ``frames`` (alignment rules and labels), ``records`` (episode
row, report), ``job`` (one bag in a worker), ``run`` (``convert``: all bags into one NAD), ``cli``.
The names other packages and tools use are importable from here.
"""

from na_training.convert.bag import expand_bag_paths
from na_training.convert.config import ConvertError, load_config
from na_training.convert.run import convert

__all__ = ["ConvertError", "convert", "expand_bag_paths", "load_config"]
