"""Reserved I/O as placement inventory: the compute node's side of MIST.

Each compute node reports its capacity for reserved I/O as an inventory of
the custom resource classes of :mod:`vsmtio_contract.io_reservation`, so
that placement never admits more reserved I/O on a host than it declared
(that module says how a flavor asks). The inventory reaches placement
through nova's provider config (:mod:`vsmtio_nova.provider_config`), so any
compute driver's host can declare it.
"""

from oslo_config import cfg

from vsmtio_contract.io_reservation import PLACEMENT_MAX
from vsmtio_contract.io_reservation import RC_IOPS
from vsmtio_contract.io_reservation import RC_MIB_PER_S

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
                    'here. ``vsmtio-nova-conf provider-config`` writes it '
                    'into nova\'s provider config; nova-compute reads that '
                    'when it starts.'),
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
