"""I/O reservations (MIST): flavor keys, placement resource classes.

A flavor reserves I/O for its instances with ``vsmtio:io_reservation_iops``
and/or ``vsmtio:io_reservation_mib_per_s``: the vsmtio agent on the
instance's host protects it from host-side interference while it gets less
than that (``doc/source/mist.rst``).

Admission is placement's, as nova does all admission: each compute node
reports its capacity for reserved I/O as an inventory of the custom
resource classes :data:`RC_IOPS` and :data:`RC_MIB_PER_S`
(``[vsmtio] io_reservation_capacity_iops`` / ``_mib_per_s`` on the
compute node), and the flavor asks for its reservation as a resource,
``resources:CUSTOM_VSMTIO_IO_IOPS=<same number>``. Placement then never
puts more reserved I/O on a host than it declared, and the scheduler
answers NoValidHost when no host has room.

nova's extra-spec validators judge one key at a time, so nova-api cannot
check that the two keys agree. The agent honours only what placement
admitted: the smaller of the declared reservation and the resource request
(:func:`honoured`); a declaration without a matching resource request is
not protected, and the agent says so. This module imports nothing of nova:
the agent reads the same names on hosts without nova.
"""

import re

EXTRA_SPEC_IOPS = 'vsmtio:io_reservation_iops'
EXTRA_SPEC_MIB_PER_S = 'vsmtio:io_reservation_mib_per_s'
RC_IOPS = 'CUSTOM_VSMTIO_IO_IOPS'
RC_MIB_PER_S = 'CUSTOM_VSMTIO_IO_MIB_PER_S'
#: placement's largest integer (inventory totals and requested amounts)
PLACEMENT_MAX = 2 ** 31 - 1
MIB = 1024 * 1024

# Matched whole (fullmatch): ``$`` would also match before a final newline.
_RESOURCES = re.compile(r'resources[a-zA-Z0-9_-]{0,64}:(?P<rc>.+)')


def _int(value):
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def parse_amount(value):
    """A reservation's amount as nova-api reads it, or ValueError.

    The same rule as the API's validator (which calls this through
    :mod:`vsmtio_contract.specs`): Python's ``int`` of the string, from 1
    to :data:`PLACEMENT_MAX`.
    """
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError('%r is not a valid integer value' % (value,))
    if number < 1:
        raise ValueError('%d is less than the min value of 1' % number)
    if number > PLACEMENT_MAX:
        raise ValueError('%d is greater than the max value of %d'
                         % (number, PLACEMENT_MAX))
    return number


def requested(extra_specs):
    """(IOPS, MiB/s) the flavor's resource requests ask placement for."""
    got = {RC_IOPS: 0, RC_MIB_PER_S: 0}
    for key, value in extra_specs.items():
        match = _RESOURCES.fullmatch(key)
        if match and match.group('rc') in got:
            got[match.group('rc')] += _int(value) or 0
    return got[RC_IOPS] or None, got[RC_MIB_PER_S] or None


def _declared(extra_specs, key, problems):
    value = extra_specs.get(key)
    if value is None:
        return None
    try:
        return parse_amount(value)
    except ValueError as e:
        problems.append('%s=%r is ignored: %s (nova-api refuses it from '
                        'microversion 2.86 on)' % (key, value, e))
        return None


def declared(extra_specs, problems=None):
    """(IOPS, MiB/s) the flavor's ``vsmtio:`` keys reserve (None: unset).

    A value nova-api would refuse reserves nothing; why is appended to
    ``problems`` when given.
    """
    problems = [] if problems is None else problems
    return (_declared(extra_specs, EXTRA_SPEC_IOPS, problems),
            _declared(extra_specs, EXTRA_SPEC_MIB_PER_S, problems))


def honoured(extra_specs):
    """(IOPS, bytes/s, problems): what the agent protects, and why not.

    Each declared reservation is capped at what placement admitted; a
    declaration with no resource request is not honoured at all (nothing
    stops a host from holding more such instances than it can serve).
    """
    problems = []
    out = []
    for name, want, got, rc in zip(
            (EXTRA_SPEC_IOPS, EXTRA_SPEC_MIB_PER_S),
            declared(extra_specs, problems),
            requested(extra_specs), (RC_IOPS, RC_MIB_PER_S)):
        if want is None:
            out.append(None)
            continue
        if got is None:
            problems.append('%s=%d has no resources:%s request: not '
                            'admitted by placement, not protected'
                            % (name, want, rc))
            out.append(None)
            continue
        if got < want:
            problems.append('%s=%d but placement admitted %d: protecting '
                            '%d' % (name, want, got, got))
        out.append(min(want, got))
    iops, mib = out
    return iops, (mib * MIB if mib else None), problems
