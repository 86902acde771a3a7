"""Workload classes: the ``vsmtio:workload`` vocabulary of the cloud side.

A flavor declares ``vsmtio:workload`` as ``io`` or ``cpu``; ``auto`` (and an
unset key) means the agent measures the class and the scheduler treats the
instance as unknown. The API validators, the compute side and the
scheduler use :class:`WorkloadClass`; the agent's policy does not (it
classes each vCPU, not the instance, as a ``vsmtio_agent.model.Role`` with
the same words ``io`` and ``cpu``). What the agent measures reaches the
scheduler as server metadata under :data:`MEASURED_CLASS_KEY`, signed as
:func:`sign_measured` says. This module has no nova import, so code on a
compute host where nova is not importable can use it.
"""

import enum
import hmac

EXTRA_SPEC_WORKLOAD = 'vsmtio:workload'

#: Server metadata key under which the agent publishes the class it measured
#: for an instance: ``<class>:<signature>`` (see :func:`sign_measured`).
#: Namespaced like the extra spec so it cannot clash with a user's keys.
MEASURED_CLASS_KEY = 'vsmtio:measured_class'


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


def _signature(secret, instance_uuid, cls):
    msg = ('%s:%s' % (instance_uuid, cls.value)).encode()
    return hmac.new(secret.encode(), msg, 'sha256').hexdigest()


def sign_measured(secret, instance_uuid, cls):
    """The :data:`MEASURED_CLASS_KEY` value the agent writes for an instance.

    Server metadata is writable by the instance's owner, so the value
    carries an HMAC-SHA256 of the instance uuid and the class under a
    secret only the agents and the computes hold. An owner can delete the
    value (the instance then counts with its declared class) or put back an
    earlier value the agent wrote for this same instance, but cannot make
    up a class, nor copy another instance's value.
    """
    cls = WorkloadClass(cls)
    return '%s:%s' % (cls.value, _signature(secret, instance_uuid, cls))


def verify_measured(secret, instance_uuid, value):
    """The measured class in ``value`` if its signature holds, else None.

    ``auto`` is no measurement; without a secret nothing is trusted.
    """
    if not secret or not isinstance(value, str):
        return None
    cls, _sep, sig = value.partition(':')
    try:
        cls = WorkloadClass(cls)
    except ValueError:
        return None
    if cls is WorkloadClass.AUTO:
        return None
    if not hmac.compare_digest(sig, _signature(secret, instance_uuid, cls)):
        return None
    return cls
