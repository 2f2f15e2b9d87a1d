"""Leader-to-follower teleoperation node, episode recorder node and its keyboard CLI."""
