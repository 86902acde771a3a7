"""The vsmtio extension of nova's libvirt driver, and how nova finds it.

nova 34 loads ``[DEFAULT] compute_driver`` as ``nova.virt.<value>``
(``nova.virt.driver.load_compute_driver``) with no fallback to a full class
path, so an out-of-tree driver cannot be named there directly.
:func:`register` makes the driver importable as ``nova.virt.vsmtio``;
``vsmtio-nova-compute`` calls it and then runs nova-compute unchanged, with
``compute_driver = vsmtio.VsmtioLibvirtDriver``
(:data:`vsmtio_nova.provider_config.COMPUTE_DRIVER`).
"""

import importlib
import sys

NOVA_NAME = 'nova.virt.vsmtio'


def register():
    """Alias our driver module as ``nova.virt.vsmtio``; idempotent."""
    import nova.virt

    module = importlib.import_module('vsmtio_nova.virt.libvirt.driver')
    sys.modules.setdefault(NOVA_NAME, module)
    nova.virt.vsmtio = sys.modules[NOVA_NAME]
    return module
