"""nova-compute, able to load the vsmtio libvirt driver.

nova 34 resolves ``compute_driver`` only inside ``nova.virt``; this runs
nova's own ``nova-compute`` after making ``vsmtio.VsmtioLibvirtDriver``
resolvable there (:func:`vsmtio_nova.virt.register`), and with each node's
I/O : CPU mix kept in its stats for the scheduler
(:func:`vsmtio_nova.compute.stats.install`).
"""


def main():
    # nova.cmd.compute applies nova's monkey patching on import: first.
    from nova.cmd import compute

    from vsmtio_nova.compute import stats
    from vsmtio_nova import virt

    virt.register()
    stats.install()
    return compute.main()
