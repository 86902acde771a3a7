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

from oslo_utils import strutils

from vsmtio_contract import kernel_abi
from vsmtio_nova import extra_specs

TRAIT = 'CUSTOM_VSMTIO_CONTEXT_RETENTION'
TRAIT_SPEC = 'trait:' + TRAIT


def host_can_retain(virt_type, sysfs_root):
    """``(bool, why)``: whether this compute host can retain contexts."""
    if virt_type != 'kvm':
        return False, ('[libvirt] virt_type is %s: only KVM lets a guest '
                       'MWAIT' % virt_type)
    version, why = kernel_abi.patched_abi(sysfs_root)
    return version is not None, why


def flavor_asks(specs):
    """Whether flavor extra specs ask for context retention.

    A value that is not a boolean asks for nothing here: nova-api refuses
    it (:mod:`vsmtio_nova.extra_specs`) and the driver refuses a flavor
    that predates that check.
    """
    value = specs.get(extra_specs.EXTRA_SPEC_CONTEXT_RETENTION)
    return strutils.bool_from_string(value, strict=False, default=False)


def flavor_requires_trait(specs):
    return specs.get(TRAIT_SPEC) == 'required'
