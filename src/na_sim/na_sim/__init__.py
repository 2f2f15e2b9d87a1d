"""Simulated rig: servo physics, DYNAMIXEL Protocol 2.0 and F/T sensor emulators, scripted operator tasks, fault injection and the offline episode generator."""
