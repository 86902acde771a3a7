"""Validators for the ``vsmtio:`` flavor extra specs.

Registered through the ``nova.api.extra_spec_validators`` entry point, so
nova-api (microversion 2.86 and later) refuses a bad value, or any unknown
key in the ``vsmtio`` namespace, with HTTP 400.
"""

from nova.api.validation.extra_specs import base

from vsmtio_nova import balloon
from vsmtio_nova import workload

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
]


def register():
    return EXTRA_SPEC_VALIDATORS + balloon.EXTRA_SPEC_VALIDATORS
