"""Validators for the ``vsmtio:`` flavor extra specs.

Registered through the ``nova.api.extra_spec_validators`` entry point, so
nova-api (microversion 2.86 and later) refuses a bad value, or any unknown
key in the ``vsmtio`` namespace, with HTTP 400. Each validator calls the
key's parser in :data:`vsmtio_contract.specs.PARSERS`, the function every
run-time reader (nova-compute, the scheduler, the agent) uses too: what
the API refuses is ignored at run time, never read differently.
"""

import dataclasses

from nova.api.validation.extra_specs import base
from nova import exception

from vsmtio_contract import io_reservation
from vsmtio_contract import specs
from vsmtio_contract import workload
from vsmtio_nova import balloon

EXTRA_SPEC_CONTEXT_RETENTION = specs.CONTEXT_RETENTION


@dataclasses.dataclass
class ContractValidator(base.ExtraSpecValidator):
    """nova's validator whose check is the contract's parser of the key.

    ``value`` still describes the key for nova's documentation; the
    verdict is the parser's alone.
    """

    def validate(self, name, value):
        if name != self.name:
            raise exception.ValidationError(
                "Validation failed; expected %r, not %r" % (self.name, name))
        try:
            specs.PARSERS[self.name](value)
        except specs.Invalid as e:
            raise exception.ValidationError('Validation failed; %s' % e)


EXTRA_SPEC_VALIDATORS = [
    ContractValidator(
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
    ContractValidator(
        name=EXTRA_SPEC_CONTEXT_RETENTION,
        description=(
            'Whether the guest may hold its hyperthread with MONITOR/MWAIT '
            'while idle (context retention). ``true`` starts the guest with '
            'MWAIT exits disabled (QEMU ``-overcommit cpu-pm=on``) through '
            'the vsmtio libvirt driver extension; such a guest holds its '
            'CPUs while it waits, so it is given only with dedicated CPUs '
            '(``hw:cpu_policy=dedicated``) and '
            '``trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required``: the '
            'scheduler refuses any other such flavor. Only this extra spec '
            'enables retention; an image property never does.'),
        value={
            'type': bool,
            'description': 'Whether to allow context retention.',
        },
    ),
    # -- I/O reservations (MIST); see vsmtio_contract.io_reservation ----------
    ContractValidator(
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
    ContractValidator(
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
