"""Validators for the ``vsmtio:`` flavor extra specs.

Registered through the ``nova.api.extra_spec_validators`` entry point, so
nova-api (microversion 2.86 and later) refuses a bad value, or any unknown
key in the ``vsmtio`` namespace, with HTTP 400.
"""

from nova.api.validation.extra_specs import base

from vsmtio_contract import io_reservation
from vsmtio_contract import workload
from vsmtio_nova import balloon

EXTRA_SPEC_CONTEXT_RETENTION = 'vsmtio:context_retention'

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name=workload.EXTRA_SPEC_WORKLOAD,
        description=(
            'The workload class of the instance\'s vCPUs for vSMT-IO. '
            '``io``: mostly waits for I/O (its vCPUs retain context); '
            '``cpu``: computation-bound; ``auto`` (the default): the '
            'vsmtio agent measures it and the scheduler treats it as '
            'unknown. The scheduler keeps each host\'s I/O : CPU mix '
            'heterogeneous using this class.'),
        value={
            'type': str,
            'enum': list(workload.VALUES),
            'description': 'The workload class.',
        },
    ),
    base.ExtraSpecValidator(
        name=EXTRA_SPEC_CONTEXT_RETENTION,
        description=(
            'Whether the guest may hold its hyperthread with MONITOR/MWAIT '
            'while idle (context retention). ``true`` starts the guest with '
            'MWAIT exits disabled (QEMU ``-overcommit cpu-pm=on``) through '
            'the vsmtio libvirt driver extension; such a guest holds its '
            'hyperthread while it waits, so it belongs on dedicated or '
            'vsmtio-managed CPUs.'),
        value={
            'type': bool,
            'description': 'Whether to allow context retention.',
        },
    ),
    # -- I/O reservations (MIST); see vsmtio_contract.io_reservation ----------
    base.ExtraSpecValidator(
        name=io_reservation.EXTRA_SPEC_IOPS,
        description=(
            'I/O operations per second reserved for each instance: while '
            'it gets less and its vCPUs suffer CPU interference, the '
            'vsmtio agent protects it (real-time vCPUs, block I/O weight, '
            'interrupt separation). Admission is placement\'s: also set '
            '``resources:%s`` to the same number; the agent protects at '
            'most what placement admitted.' % io_reservation.RC_IOPS),
        value={
            'type': int,
            'min': 1,
            'max': io_reservation.PLACEMENT_MAX,
            'description': 'Reserved IOPS (a positive integer).',
        },
    ),
    base.ExtraSpecValidator(
        name=io_reservation.EXTRA_SPEC_MIB_PER_S,
        description=(
            'Block I/O bandwidth in MiB/s reserved for each instance, '
            'protected like ``%s``. Also set ``resources:%s`` to the same '
            'number.' % (io_reservation.EXTRA_SPEC_IOPS,
                         io_reservation.RC_MIB_PER_S)),
        value={
            'type': int,
            'min': 1,
            'max': io_reservation.PLACEMENT_MAX,
            'description': 'Reserved MiB/s (a positive integer).',
        },
    ),
]


def register():
    return EXTRA_SPEC_VALIDATORS + balloon.EXTRA_SPEC_VALIDATORS
