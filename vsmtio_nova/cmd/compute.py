"""nova-compute, able to load the vsmtio libvirt driver.

nova 34 resolves ``compute_driver`` only inside ``nova.virt``; this runs
nova's own ``nova-compute`` after making ``vsmtio.VsmtioLibvirtDriver``
resolvable there (:func:`vsmtio_nova.virt.register`).
"""


def main():
    # nova.cmd.compute applies nova's monkey patching on import: first.
    from nova.cmd import compute

    from vsmtio_nova import virt

    virt.register()
    return compute.main()
