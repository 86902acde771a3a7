"""Which hosts can give context retention, and how flavors ask for them.

A host can when nova runs its guests under KVM (``[libvirt] virt_type``)
and its kernel carries the vsmtio patches (``/sys/kernel/vsmtio/
abi_version`` of a version this release knows, ``host_kernel_patches/
ABI.rst``): it then advertises the placement trait :data:`TRAIT`
through nova's provider config (:mod:`vsmtio_nova.provider_config`). A
flavor asking for retention carries
``trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required``, so placement offers
only such hosts, and a request with no such host left fails with
NoValidHost instead of booting without what it asked for.
"""

from oslo_log import log as logging

from vsmtio_contract import kernel_abi
from vsmtio_contract import specs

LOG = logging.getLogger(__name__)

TRAIT = 'CUSTOM_VSMTIO_CONTEXT_RETENTION'
TRAIT_SPEC = 'trait:' + TRAIT
#: The flavor extra spec (nova's) that gives an instance dedicated CPUs.
CPU_POLICY_SPEC = 'hw:cpu_policy'
DEDICATED = 'dedicated'


def host_can_retain(virt_type, sysfs_root):
    """``(bool, why)``: whether this compute host can retain contexts."""
    if virt_type != 'kvm':
        return False, ('[libvirt] virt_type is %s: only KVM lets a guest '
                       'MWAIT' % virt_type)
    version, why = kernel_abi.patched_abi(sysfs_root)
    return version is not None, why


def flavor_asks(extra_specs, subject='a flavor'):
    """Whether flavor extra specs ask for context retention.

    Read with the API's own parser: a value nova-api would refuse asks for
    nothing, with one warning per ``subject``.
    """
    return bool(specs.read(extra_specs, specs.CONTEXT_RETENTION, subject,
                           LOG, default=False))


def flavor_requires_trait(extra_specs):
    return extra_specs.get(TRAIT_SPEC) == 'required'


def flavor_dedicates_cpus(extra_specs):
    """Whether the flavor itself gives its instances dedicated CPUs.

    Only the flavor's ``hw:cpu_policy`` counts: an image's ``hw_cpu_policy``
    is the tenant's, and a tenant's input never enables host behaviour.
    """
    return extra_specs.get(CPU_POLICY_SPEC) == DEDICATED


def why_not_honoured(extra_specs):
    """Why a flavor asking for retention cannot have it, or None.

    A retaining guest holds its CPUs while idle (MWAIT exits are off), so
    it must own them; and placement must send it to a host that can
    retain.
    The missing extra specs come first: the refusal becomes a fault
    message, which nova cuts at 255 characters (:mod:`vsmtio_nova.faults`).
    """
    missing = []
    if not flavor_dedicates_cpus(extra_specs):
        missing.append('%s=%s (a retaining guest holds its idle CPUs)'
                       % (CPU_POLICY_SPEC, DEDICATED))
    if not flavor_requires_trait(extra_specs):
        missing.append('%s=required' % TRAIT_SPEC)
    if not missing:
        return None
    return ('missing extra spec %s for %s=true'
            % (' and '.join(missing), specs.CONTEXT_RETENTION))
