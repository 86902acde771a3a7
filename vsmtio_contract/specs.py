"""One parser per ``vsmtio:`` key, for nova-api and every run-time reader.

nova validates flavor extra specs only at API microversion 2.86 and later,
and never the ones written before the validators were installed or
straight into the database; image properties it does not validate at all.
So a value nova-api would refuse can still reach nova-compute, the
scheduler and the agent. Each of them reads the key through the same
function nova-api's validator calls (:data:`PARSERS`), so a value is either
what the API would accept, with the same meaning, or ignored: never
reinterpreted (``IO`` is not ``io``). :func:`read` ignores a bad value with
one warning per subject (flavor or instance) and value, not one per
periodic task. This module imports neither side and no nova.
"""

import collections
import threading

from oslo_utils import strutils

from vsmtio_contract import io_reservation
from vsmtio_contract import workload

#: Flavor extra spec: whether the guest may hold its hyperthread with MWAIT.
CONTEXT_RETENTION = 'vsmtio:context_retention'
#: Image property with which an image may ask for retention (never enable).
IMAGE_CONTEXT_RETENTION = 'vsmtio_context_retention'


class Invalid(ValueError):
    """A value nova-api refuses, with the one-line reason it gives."""


def boolean(key):
    """The parser of a boolean key: nova's own strict boolean words."""
    def parse(value):
        try:
            return strutils.bool_from_string(value, strict=True)
        except (TypeError, ValueError):
            raise Invalid('%s must be a boolean (true or false), not %r'
                          % (key, value))
    parse.__doc__ = 'Parse %s: a strict boolean.' % key
    return parse


def _workload(value):
    try:
        return workload.parse(value)
    except workload.InvalidWorkloadClass as e:
        raise Invalid(str(e))


def _amount(key):
    def parse(value):
        try:
            return io_reservation.parse_amount(value)
        except ValueError as e:
            raise Invalid('%s: %s' % (key, e))
    return parse


#: Flavor extra spec -> the one function that parses its value (raising
#: :class:`Invalid` for what nova-api refuses).
PARSERS = {
    workload.EXTRA_SPEC_WORKLOAD: _workload,
    CONTEXT_RETENTION: boolean(CONTEXT_RETENTION),
    io_reservation.EXTRA_SPEC_IOPS: _amount(io_reservation.EXTRA_SPEC_IOPS),
    io_reservation.EXTRA_SPEC_MIB_PER_S: _amount(
        io_reservation.EXTRA_SPEC_MIB_PER_S),
}

#: Image property -> its parser (nova does not validate image properties).
IMAGE_PARSERS = {
    IMAGE_CONTEXT_RETENTION: boolean(IMAGE_CONTEXT_RETENTION),
}


class OnceEach(object):
    """Remembers what was already said, so each thing is said once.

    Bounded (the oldest are forgotten first), so a long-running service
    that sees many flavors and instances does not grow without end; one
    forgotten may be said again, which is harmless.
    """

    def __init__(self, size=4096):
        self._seen = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first(self, what):
        """True the first time ``what`` is seen (then False)."""
        with self._lock:
            if what in self._seen:
                self._seen.move_to_end(what)
                return False
            self._seen[what] = True
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True

    def clear(self):
        with self._lock:
            self._seen.clear()


#: What :func:`read` warned about in this process.
WARNED = OnceEach()


def read(mapping, key, subject, log, default=None, parsers=None):
    """The parsed value of ``key`` in ``mapping``, or ``default``.

    ``default`` when the key is unset or its value is one nova-api would
    refuse; the latter is logged as a warning once per ``subject`` (say
    ``flavor m1.io`` or ``instance <uuid>``), key and value.
    """
    value = (mapping or {}).get(key)
    if value is None:
        return default
    try:
        return (parsers or PARSERS)[key](value)
    except Invalid as e:
        if WARNED.first((subject, key, value)):
            log.warning('Ignoring %s of %s: %s (nova-api refuses this '
                        'value from microversion 2.86 on, and stores it '
                        'below; it is not reinterpreted)', key, subject, e)
        return default
