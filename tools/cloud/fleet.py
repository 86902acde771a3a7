"""More compute hosts for the one-machine cloud: nova's fake driver.

The libvirt host runs real guests, one at a time on two cores. The
scheduler's mix can only be seen among several hosts, so the cloud adds
:data:`HOSTS`: each a ``vsmtio-nova-compute`` process of its own (its own
host name, state, locks and an empty provider config directory: a fake
host offers no retention and no reserved I/O; the cloud's nova.conf is
read first and the host's file over it) on nova's ``fake.MediumFakeDriver``
(10 vCPUs, no guest runs). Their mix is counted by the same
``vsmtio-nova-compute`` stats, and the real scheduler and placement choose
among them.

They form the availability zone :data:`ZONE`; the libvirt host forms
:data:`layout.DEFAULT_ZONE`, which nova-api gives every request that names no
zone (nova.conf ``default_schedule_zone``), so tests that need a real
guest and its agent still get the libvirt host.
"""

import os

import configs
import layout
import procs

HOSTS = ('vsmtio-fleet-1', 'vsmtio-fleet-2', 'vsmtio-fleet-3')
ZONE = 'fleet'
DRIVER = 'fake.MediumFakeDriver'
#: Placement's VCPU allocation ratio on the fleet hosts: 10 vCPUs each,
#: so that a batch of a few servers per host fills a real share of them
#: and the filter's room-to-come-back rule is tested, not waived.
CPU_ALLOCATION_RATIO = 1.0


def host_conf(host):
    """The file read after the cloud's nova.conf by one fleet host."""
    state = layout.path('data', 'nova-' + host)
    provider_config = layout.path('etc', 'nova-' + host, 'provider_config')
    os.makedirs(os.path.join(state, 'instances'), exist_ok=True)
    os.makedirs(provider_config, exist_ok=True)
    return configs.write_ini(layout.path('etc', 'nova-' + host, 'host.conf'), {
        'DEFAULT': {'host': host,
                    'compute_driver': DRIVER,
                    'state_path': state,
                    'instances_path': os.path.join(state, 'instances'),
                    'log_file': os.path.join(layout.LOG,
                                             'nova-compute-%s.log' % host),
                    'initial_cpu_allocation_ratio': CPU_ALLOCATION_RATIO,
                    'initial_ram_allocation_ratio': 1.0},
        'oslo_concurrency': {'lock_path': os.path.join(state, 'locks')},
        'compute': {'provider_config_location': provider_config},
    })


def computes(nova_conf):
    """Start every fleet host's nova-compute and map it to the cell."""
    for host in HOSTS:
        conf = host_conf(host)
        procs.start('nova-compute-' + host, [
            os.path.join(layout.BIN, 'vsmtio-nova-compute'),
            '--config-file', nova_conf, '--config-file', conf])
    manage = [os.path.join(layout.BIN, 'nova-manage'), '--config-file',
              nova_conf, 'cell_v2']

    def mapped():
        procs.run(*manage, 'discover_hosts', quiet=True)
        out = procs.run(*manage, 'list_hosts', quiet=True)
        return all(h in out for h in HOSTS)
    procs.wait_for('fleet nova-computes registered', mapped, 240)


def zones(conn):
    """The fleet's availability zone and the libvirt host's."""
    for name, zone, hosts in ((ZONE, ZONE, HOSTS),
                              (layout.DEFAULT_ZONE, layout.DEFAULT_ZONE,
                               (layout.HOSTNAME,))):
        agg = conn.compute.create_aggregate(name=name, availability_zone=zone)
        for host in hosts:
            conn.compute.add_host_to_aggregate(agg, host)
