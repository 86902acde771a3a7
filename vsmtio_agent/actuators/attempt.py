"""Writing a knob so that a refused write leaves no record behind."""

from vsmtio_agent.actuators import base


def write(actuator, key, value):
    """``actuator.write``, forgetting the original if the write failed.

    A failed write left the original in place: nothing to restore, and a
    restore would only fail the same way.
    """
    try:
        actuator.write(key, value)
    except base.ActuatorError:
        try:
            unchanged = (actuator.read(key) ==
                         actuator.record.original(actuator.kind, key))
        except (base.ActuatorError, KeyError):
            unchanged = False
        if unchanged:
            actuator.record.forget(actuator.kind, key)
        raise
