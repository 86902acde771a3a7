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

    ``None`` means the key is unset: ``AUTO``. Anything else that is not
    exactly one of :data:`VALUES` raises :class:`InvalidWorkloadClass`, as
    nova-api's validator does (it calls this function): ``IO`` or `` io``
    is refused, never read as ``io``
    (:mod:`vsmtio_contract.specs`).
    """
    if value is None:
        return WorkloadClass.AUTO
    if isinstance(value, str) and value in VALUES:
        return WorkloadClass(value)
    raise InvalidWorkloadClass(
        '%s must be one of %s, not %r'
        % (EXTRA_SPEC_WORKLOAD, ', '.join(VALUES), value))


def from_extra_specs(extra_specs):
    """The declared class of a flavor's extra specs (unset is ``AUTO``)."""
    return parse((extra_specs or {}).get(EXTRA_SPEC_WORKLOAD))


#: The longest a signed measured class may be valid (seconds): a verifier
#: refuses a value that claims to stay valid longer, and the agent's
#: lifetime option cannot exceed it.
MAX_LIFETIME = 86400


def _signature(secret, instance_uuid, cls, host, expires):
    msg = ('%s:%s:%s:%d' % (instance_uuid, cls.value, host, expires)).encode()
    return hmac.new(secret.encode(), msg, 'sha256').hexdigest()


def sign_measured(secret, instance_uuid, cls, host, expires):
    """The :data:`MEASURED_CLASS_KEY` value the agent writes for an instance.

    ``<class>:<expires>:<host>:<signature>``. Server metadata is writable
    by the instance's owner, so the value carries an HMAC-SHA256 of the
    instance uuid, the class, the host that measured it and when the value
    expires (UTC seconds since the epoch), under a secret only the agents
    and the computes hold. An owner can delete the value (the instance then
    counts with its declared class), but cannot make up a class, copy
    another instance's value, carry a value to another host, or keep one
    past its expiry; an earlier value put back while still valid is
    repaired by the agent, which reads back what it published.
    """
    cls = WorkloadClass(cls)
    expires = int(expires)
    return '%s:%d:%s:%s' % (cls.value, expires, host,
                            _signature(secret, instance_uuid, cls, host,
                                       expires))


def parse_measured(value):
    """``(class, expires, host, signature)`` of a value, or None."""
    if not isinstance(value, str):
        return None
    cls, _s, rest = value.partition(':')
    expires, _s, rest = rest.partition(':')
    host, _s, sig = rest.rpartition(':')
    try:
        return WorkloadClass(cls), int(expires), host, sig
    except ValueError:
        return None


def check_measured(secret, instance_uuid, value, host, now,
                   max_lifetime=MAX_LIFETIME):
    """``(class, None)`` if ``value`` is to be trusted, else ``(None, why)``.

    Trusted: signed with ``secret`` for this instance, by the agent of
    ``host`` (the instance's host), not expired at ``now`` (UTC seconds)
    and not claiming to stay valid longer than ``max_lifetime``. ``auto``
    is no measurement; without a secret nothing is trusted.
    """
    if not secret:
        return None, 'no secret is configured'
    parsed = parse_measured(value)
    if parsed is None:
        return None, 'it is not <class>:<expires>:<host>:<signature>'
    cls, expires, signed_host, sig = parsed
    if cls is WorkloadClass.AUTO:
        return None, 'auto is no measurement'
    if not hmac.compare_digest(sig, _signature(
            secret, instance_uuid, cls, signed_host, expires)):
        return None, 'its signature does not hold'
    if signed_host != host:
        return None, ('it was measured on %s, not on the instance\'s host %s'
                      % (signed_host, host))
    if expires <= now:
        return None, 'it expired %d s ago' % (now - expires)
    if expires - now > max_lifetime:
        return None, ('it claims to stay valid %d s, beyond %d s'
                      % (expires - now, max_lifetime))
    return cls, None


def verify_measured(secret, instance_uuid, value, host, now,
                    max_lifetime=MAX_LIFETIME):
    """The measured class in ``value`` if it is trusted, else None."""
    return check_measured(secret, instance_uuid, value, host, now,
                          max_lifetime)[0]
