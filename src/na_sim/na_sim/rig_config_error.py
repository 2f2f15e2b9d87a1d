"""The error of a bad rig or servo configuration, below both the config reader (``na_sim.rig_config``) and the
servo family table it consults (``na_sim.sim_family``), so that neither imports the other to raise it."""


class RigConfigError(ValueError):
    """A rig or servo configuration file is missing or malformed."""
