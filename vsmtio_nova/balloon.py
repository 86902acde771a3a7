"""The ``vsmtio:cpu_balloon`` flavor key: what a ballooning guest is told.

A guest that runs the vsmtio CPU balloon (the ``vsmtio-balloon`` image
element) halts its vCPUs for the share of time its CPU cap makes
unavailable, so that its compute-bound tasks cannot spend the budget its
I/O-bound tasks will need (xBalloon).  It sizes the balloon from the cap
when the host tells it the cap, and from steal time otherwise.  nova caps
a vCPU with ``quota:cpu_quota`` and ``quota:cpu_period`` (libvirt's
per-vCPU ``<cputune><quota>``/``<period>``); for the flavors that ask,
the vsmtio compute driver passes that cap into the guest as one SMBIOS
OEM string (type 11), ``vsmtio:cpu_cap=<quota_us>/<period_us>``.

This module has no libvirt in it: nova-api imports it for the validator.
"""

from nova.api.validation.extra_specs import base
from nova import exception
from oslo_utils import strutils

EXTRA_SPEC = 'vsmtio:cpu_balloon'
OEM_PREFIX = 'vsmtio:cpu_cap='
# The cgroup CPU period libvirt leaves in place when a flavor sets a quota
# without a period (the kernel's default, 100 ms).
DEFAULT_PERIOD_US = 100000

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name=EXTRA_SPEC,
        description=(
            'Whether the guest runs the vsmtio CPU balloon (xBalloon) and '
            'should be told its CPU cap.  ``true``: the vsmtio libvirt '
            'driver passes the cap of ``quota:cpu_quota`` and '
            '``quota:cpu_period`` into the guest as the SMBIOS OEM string '
            '``%s<quota>/<period>``; the balloon in the guest image (the '
            'vsmtio-balloon element) then halts each vCPU for the share '
            'the cap makes unavailable, which keeps the budget for the '
            'guest\'s I/O-bound tasks.  Without a quota the guest sizes '
            'the balloon from steal time.' % OEM_PREFIX),
        value={
            'type': bool,
            'description': 'Whether to tell the guest its CPU cap.',
        },
    ),
]


def requested(flavor):
    """Whether the flavor asks for the balloon; InvalidInput if garbled.

    A flavor made before the API validator was installed (or through a
    microversion older than 2.86) can hold a bad value: refuse it at
    spawn, naming the key.
    """
    value = flavor.extra_specs.get(EXTRA_SPEC)
    if value is None:
        return False
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError as e:
        raise exception.InvalidInput(
            reason='flavor extra spec %s: %s' % (EXTRA_SPEC, e))


def cap(flavor):
    """(quota_us, period_us) of each vCPU, or None when it is not capped.

    The same keys and meaning as nova's own ``_update_guest_cputune``: a
    quota of zero or less (libvirt: unlimited) is no cap.  A quota at or
    above the period caps nothing either, and the guest's balloon turns
    itself off when told so.
    """
    specs = flavor.extra_specs
    try:
        quota = int(specs.get('quota:cpu_quota', 0))
        period = int(specs.get('quota:cpu_period', DEFAULT_PERIOD_US))
    except ValueError as e:
        raise exception.InvalidInput(
            reason='flavor extra spec quota:cpu_quota/cpu_period: %s' % e)
    if quota <= 0 or period <= 0:
        return None
    return quota, period


def oem_strings(flavor):
    """The SMBIOS OEM strings that tell the guest its cap (maybe none)."""
    capped = cap(flavor)
    if capped is None:
        return []
    return ['%s%d/%d' % ((OEM_PREFIX,) + capped)]
