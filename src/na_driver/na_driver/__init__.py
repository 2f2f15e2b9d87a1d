"""DYNAMIXEL arm driver node and F/T sensor driver node (ATI Net F/T RDT over UDP, serial line sensor)."""
