"""Sensors: wait on a group's state, type, protocol, lag or emptiness (deferrable or poking)."""
