"""Workload classes: the ``vsmtio:workload`` vocabulary of the cloud side.

A flavor declares ``vsmtio:workload`` as ``io`` or ``cpu``; ``auto`` (and an
unset key) means the agent measures the class and the scheduler treats the
instance as unknown. The API validators, the compute side and the
scheduler use :class:`WorkloadClass`; the agent's policy does not (it
classes each vCPU, not the instance, as a ``vsmtio_agent.model.Role`` with
the same words ``io`` and ``cpu``). What the agent measures reaches the
scheduler as server metadata under :data:`MEASURED_CLASS_KEY`, signed as
:func:`sign_measured` says, with the key of the host that measured it
(:func:`derive_host_key`). This module has no nova import, so code on a
compute host where nova is not importable can use it.
"""

import enum
import hmac
import typing

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

#: Prefix of what a host key is derived from: it keeps a host key apart
#: from any other value ever computed with the root secret.
_HOST_KEY_CONTEXT = 'vsmtio measured class host key\x00'


class Measurement(typing.NamedTuple):
    """A trusted measured class: what it says, until when, for which host."""

    cls: WorkloadClass
    expires: int
    host: str


def derive_host_key(root, host):
    """The key the agent of compute host ``host`` signs its classes with.

    ``HMAC-SHA256(root, context || host)`` in hex, from the cloud's root
    secret, which only the controllers hold (the scheduler and Watcher
    derive every host's key from it; ``vsmtio-nova-conf host-key`` prints
    one for an operator to install). A compute host is given its own key
    only: a verifier checks a class with the key of the host the instance
    runs on, so the key of one host signs classes that count on that host
    only, and a compromised host can forge the classes of its own
    instances but of no other host's. Deriving (rather than one random key
    per host listed in every controller's configuration) keeps one secret
    to hold and rotate on the controllers, whatever the number of hosts.
    """
    return hmac.new(root.encode(), (_HOST_KEY_CONTEXT + host).encode(),
                    'sha256').hexdigest()


def host_keys(roots, host):
    """``host``'s keys from each of ``roots`` (newest first), unset skipped.

    During a rotation the controllers hold the new and the previous root:
    a class signed with either's key for ``host`` is accepted.
    """
    return [derive_host_key(root, host) for root in roots if root]


def _key_list(keys):
    if not keys:
        return []
    if isinstance(keys, str):
        return [keys]
    return [k for k in keys if k]


def _signature(key, instance_uuid, cls, host, expires):
    msg = ('%s:%s:%s:%d' % (instance_uuid, cls.value, host, expires)).encode()
    return hmac.new(key.encode(), msg, 'sha256').hexdigest()


def sign_measured(key, instance_uuid, cls, host, expires):
    """The :data:`MEASURED_CLASS_KEY` value the agent writes for an instance.

    ``<class>:<expires>:<host>:<signature>``. Server metadata is writable
    by the instance's owner, so the value carries an HMAC-SHA256 of the
    instance uuid, the class, the host that measured it and when the value
    expires (UTC seconds since the epoch), under ``key``: the key of that
    host (:func:`derive_host_key`), which only that host's agent and
    nova-compute and the controllers hold. An owner cannot make up a
    class, copy another instance's value, carry a value to another host, or
    keep one past its expiry; deleting or replacing the value changes
    nothing that counts, since its verifiers keep the last value they
    verified until it expires (:class:`vsmtio_nova.mix.MeasuredMemory`).
    """
    cls = WorkloadClass(cls)
    expires = int(expires)
    return '%s:%d:%s:%s' % (cls.value, expires, host,
                            _signature(key, instance_uuid, cls, host,
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


def trusted_measurement(keys, instance_uuid, value, host, now,
                        max_lifetime=MAX_LIFETIME):
    """``(Measurement, None)`` if ``value`` is trusted, else ``(None, why)``.

    Trusted: signed for this instance with one of ``keys`` (the key of
    ``host``, the instance's host, or its keys newest first during a
    rotation; one string is one key), by the agent of ``host``, not
    expired at ``now`` (UTC seconds) and not claiming to stay valid longer
    than ``max_lifetime``. ``auto`` is no measurement; without a key
    nothing is trusted.
    """
    keys = _key_list(keys)
    if not keys:
        return None, 'no key is configured'
    parsed = parse_measured(value)
    if parsed is None:
        return None, 'it is not <class>:<expires>:<host>:<signature>'
    cls, expires, signed_host, sig = parsed
    if cls is WorkloadClass.AUTO:
        return None, 'auto is no measurement'
    if not any(hmac.compare_digest(sig, _signature(
            key, instance_uuid, cls, signed_host, expires)) for key in keys):
        return None, 'its signature does not hold'
    if signed_host != host:
        return None, ('it was measured on %s, not on the instance\'s host %s'
                      % (signed_host, host))
    if expires <= now:
        return None, 'it expired %d s ago' % (now - expires)
    if expires - now > max_lifetime:
        return None, ('it claims to stay valid %d s, beyond %d s'
                      % (expires - now, max_lifetime))
    return Measurement(cls, expires, signed_host), None


def check_measured(keys, instance_uuid, value, host, now,
                   max_lifetime=MAX_LIFETIME):
    """``(class, None)`` if ``value`` is to be trusted, else ``(None, why)``.

    See :func:`trusted_measurement`.
    """
    measured, why = trusted_measurement(keys, instance_uuid, value, host,
                                        now, max_lifetime)
    return (measured.cls if measured else None), why


def verify_measured(keys, instance_uuid, value, host, now,
                    max_lifetime=MAX_LIFETIME):
    """The measured class in ``value`` if it is trusted, else None."""
    return check_measured(keys, instance_uuid, value, host, now,
                          max_lifetime)[0]
