"""Workload classes: one vocabulary for the scheduler, monitor and agent.

A flavor declares ``vsmtio:workload`` as ``io`` or ``cpu``; ``auto`` (and an
unset key) means the agent measures the class and the scheduler treats the
instance as unknown. This module has no nova import so the agent can use it
on hosts where nova is not importable.
"""

import enum

EXTRA_SPEC_WORKLOAD = 'vsmtio:workload'


class WorkloadClass(str, enum.Enum):
    IO = 'io'
    CPU = 'cpu'
    AUTO = 'auto'


VALUES = tuple(c.value for c in WorkloadClass)


class InvalidWorkloadClass(ValueError):
    pass


def parse(value):
    """Return the :class:`WorkloadClass` for an extra-spec value.

    ``None`` and ``''`` mean the key is unset: ``AUTO``. Anything else that
    is not one of :data:`VALUES` raises :class:`InvalidWorkloadClass`.
    """
    if value is None or value == '':
        return WorkloadClass.AUTO
    try:
        return WorkloadClass(str(value).strip().lower())
    except ValueError:
        raise InvalidWorkloadClass(
            '%s must be one of %s, not %r'
            % (EXTRA_SPEC_WORKLOAD, ', '.join(VALUES), value))


def from_extra_specs(extra_specs):
    """The declared class of a flavor's extra specs (unset is ``AUTO``)."""
    return parse((extra_specs or {}).get(EXTRA_SPEC_WORKLOAD))
