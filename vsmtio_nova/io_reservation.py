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

from oslo_config import cfg

EXTRA_SPEC_IOPS = 'vsmtio:io_reservation_iops'
EXTRA_SPEC_MIB_PER_S = 'vsmtio:io_reservation_mib_per_s'
RC_IOPS = 'CUSTOM_VSMTIO_IO_IOPS'
RC_MIB_PER_S = 'CUSTOM_VSMTIO_IO_MIB_PER_S'
#: placement's largest integer (inventory totals and requested amounts)
PLACEMENT_MAX = 2 ** 31 - 1
MIB = 1024 * 1024

_RESOURCES = re.compile(r'^resources[a-zA-Z0-9_-]{0,64}:(?P<rc>.+)$')

capacity_opts = [
    cfg.IntOpt('io_reservation_capacity_iops',
               default=0, min=0, max=PLACEMENT_MAX,
               help='nova-compute: the I/O operations per second this '
                    'host can guarantee to instances that reserve I/O '
                    '(``vsmtio:io_reservation_iops``), reported to '
                    'placement as the inventory of resource class '
                    'CUSTOM_VSMTIO_IO_IOPS so that nova never admits more. '
                    'Measure it as the worst case of the storage path '
                    '(random read/write), as the MIST paper does. 0 '
                    'reports no inventory: no reserving instance lands '
                    'here. Takes effect at the next resource update '
                    '(``[DEFAULT] update_resources_interval``).'),
    cfg.IntOpt('io_reservation_capacity_mib_per_s',
               default=0, min=0, max=PLACEMENT_MAX,
               help='nova-compute: the block I/O bandwidth in MiB/s this '
                    'host can guarantee to instances that reserve it '
                    '(``vsmtio:io_reservation_mib_per_s``), reported as '
                    'the inventory of CUSTOM_VSMTIO_IO_MIB_PER_S. 0 '
                    'reports none.'),
]


def inventory(conf):
    """The placement inventory records for the configured capacities."""
    out = {}
    for rc, total in ((RC_IOPS, conf.vsmtio.io_reservation_capacity_iops),
                      (RC_MIB_PER_S,
                       conf.vsmtio.io_reservation_capacity_mib_per_s)):
        if total:
            out[rc] = {'total': total, 'reserved': 0, 'min_unit': 1,
                       'max_unit': total, 'step_size': 1,
                       'allocation_ratio': 1.0}
    return out


def update_inventory(provider_tree, nodename, conf):
    """Put the reserved-I/O inventory on the compute node's provider.

    A capacity set to 0 removes its inventory (placement refuses that
    while instances hold allocations of it, and nova-compute logs it).
    """
    current = dict(provider_tree.data(nodename).inventory)
    for rc in (RC_IOPS, RC_MIB_PER_S):
        current.pop(rc, None)
    current.update(inventory(conf))
    provider_tree.update_inventory(nodename, current)


class ReservedIoInventory(object):
    """Mixin for a nova virt driver: report the reserved-I/O inventory."""

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        update_inventory(provider_tree, nodename, cfg.CONF)


def _int(value):
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def requested(extra_specs):
    """(IOPS, MiB/s) the flavor's resource requests ask placement for."""
    got = {RC_IOPS: 0, RC_MIB_PER_S: 0}
    for key, value in extra_specs.items():
        match = _RESOURCES.match(key)
        if match and match.group('rc') in got:
            got[match.group('rc')] += _int(value) or 0
    return got[RC_IOPS] or None, got[RC_MIB_PER_S] or None


def declared(extra_specs):
    """(IOPS, MiB/s) the flavor's ``vsmtio:`` keys reserve (None: unset)."""
    return (_int(extra_specs.get(EXTRA_SPEC_IOPS)),
            _int(extra_specs.get(EXTRA_SPEC_MIB_PER_S)))


def honoured(extra_specs):
    """(IOPS, bytes/s, problems): what the agent protects, and why not.

    Each declared reservation is capped at what placement admitted; a
    declaration with no resource request is not honoured at all (nothing
    stops a host from holding more such instances than it can serve).
    """
    problems = []
    out = []
    for name, want, got, rc in zip(
            (EXTRA_SPEC_IOPS, EXTRA_SPEC_MIB_PER_S), declared(extra_specs),
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
