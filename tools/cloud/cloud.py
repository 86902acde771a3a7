#!/usr/bin/env python3
"""A real one-machine OpenStack cloud for vsmtio, in one command.

    python tools/cloud/cloud.py up      # bring it up (prints the time)
    python tools/cloud/cloud.py test    # tempest with vsmtio's plugin
    python tools/cloud/cloud.py walk    # the docs' commands and refusals
    python tools/cloud/cloud.py observe # Horizon panel and Grafana checks
    python tools/cloud/cloud.py down    # stop and remove everything
    python tools/cloud/cloud.py run     # up, test, walk, observe, down

keystone, glance, placement, neutron (API only), nova (API, conductor,
scheduler, compute on libvirt with ``virt_type=qemu``, and three more
compute hosts on nova's fake driver: ``fleet.py``), Watcher (API,
decision engine, applier: ``watcher.py``) and Horizon, all
from PyPI in the Python environment this runs in (``tox -e cloud``);
MariaDB, RabbitMQ, libvirt and qemu from Debian; everything on 127.0.0.1
under ``$VSMTIO_CLOUD_DIR``. nova's vsmtio scheduler settings are written
by ``vsmtio-nova-conf``, the code the devstack plugin uses, and the
vsmtio agent runs on the compute host against the real guests.
Root only (libvirt, apt).
"""

import argparse
import os
import shutil
import sys
import time
import traceback

import configs
import doc_commands
import doc_runner
import fleet
import grafana_check
import horizon_panel
import layout
import observability
import procs
import resources
import services
import simulated_host
import walk as operator_walk
import watcher


def timed(label, func, *args):
    start = time.monotonic()
    print('[cloud] %s ...' % label, flush=True)
    result = func(*args)
    print('[cloud] %s: %.1f s' % (label, time.monotonic() - start),
          flush=True)
    return result


def up(args):
    start = time.monotonic()
    if procs.started():
        raise procs.CloudError('a cloud is already up under %s: run "down"'
                               % layout.ROOT)
    timed('Debian packages', services.ensure_packages)
    services.check_ports_free()
    for d in (layout.ETC, layout.LOG, layout.RUN, layout.DATA):
        os.makedirs(d, exist_ok=True)
    timed('mariadb', services.mariadb)
    timed('rabbitmq', services.rabbitmq)
    timed('keystone', services.keystone)
    conn = timed('keystone users, services, endpoints', resources.identity)
    timed('glance', services.glance)
    timed('placement', services.placement)
    timed('neutron', services.neutron)
    resources.neutron_warmup(conn)
    nova_conf = configs.nova('libvirt.LibvirtDriver')
    # the agent's role may call the server metadata API (nova-api reads
    # policy.d beside its configuration)
    resources.nova_policy()
    timed('vsmtio-nova-conf enable', resources.enable_vsmtio, nova_conf)
    timed('nova databases and cells', services.nova_databases, nova_conf)
    timed('nova controller', services.nova_controller, nova_conf)
    timed('libvirtd', services.libvirtd)
    timed('nova-compute', services.nova_compute, nova_conf)
    timed('fleet nova-computes', fleet.computes, nova_conf)
    timed('availability zones', fleet.zones, conn)
    timed('images and flavors', resources.images_and_flavors, conn)
    timed('install.rst\'s trait check', resources.trait_check, conn)
    timed('vsmtio-agent', services.agent)
    timed('watcher', watcher.up, conn)
    timed('prometheus and aetos', observability.up, conn)
    if not args.no_horizon:
        horizon_panel.install()
        timed('horizon', services.horizon)
    timed('tempest.conf', resources.tempest_conf, conn)
    if args.smoke:
        timed('smoke boot', resources.smoke_boot, conn)
    print('[cloud] up in %.1f s; admin credentials: %s'
          % (time.monotonic() - start, layout.path('etc', 'clouds.yaml')))


def test(args):
    return resources.run_tempest(args.regex, args.concurrency)


def walk(args):
    """The operator's walk (``walk.py``): 0, or 1 with the reason said."""
    try:
        operator_walk.walk(resources.connect(),
                           horizon=not args.no_horizon)
    except Exception as exc:   # any failure fails, said why
        traceback.print_exc()
        print('[cloud] FAILED the operator\'s walk: %s' % exc, flush=True)
        return 1
    return 0


def docs_run(args):
    """0 if the cloud ran every command of ``doc_commands.RUN``."""
    left = [key for key in doc_runner.docs_not_run()
            if not (args.no_horizon and key[0] == 'dashboard.rst')]
    total = len(doc_commands.RUN)
    print('[cloud] the docs\' commands: %d of %d run as written%s'
          % (total - len(left), total,
             ''.join('\n[cloud]   not run: %s' % ' '.join(key)
                     for key in left)), flush=True)
    return 1 if left else 0


def observe(args):
    """The Horizon panel against the agent's export, and Grafana's queries.

    Returns 0 when both pass, 1 with the reason printed otherwise.
    """
    status = 0
    try:
        if not args.no_horizon:
            timed('vsmtio-agent on the simulated host',
                  simulated_host.start)
        # both read the per-instance series of servers that still run
        with horizon_panel.booted(resources.connect()) as servers:
            checks = [('grafana dashboard queries', grafana_check.check)]
            if not args.no_horizon:
                checks.insert(0, ('horizon panel in chromium',
                                  lambda: horizon_panel.check(servers)))
            for label, check in checks:
                try:
                    timed(label, check)
                except Exception as exc:   # any failure fails, said why
                    traceback.print_exc()
                    print('[cloud] FAILED %s: %s' % (label, exc),
                          flush=True)
                    status = 1
    except Exception as exc:
        traceback.print_exc()
        print('[cloud] FAILED booting the observed servers: %s' % exc,
              flush=True)
        status = 1
    return status


def down(args):
    start = time.monotonic()
    resources.destroy_domains()
    for name in reversed(procs.started()):
        began = time.monotonic()
        procs.stop(name)
        if time.monotonic() - began > 5:
            print('[cloud] %s took %.1f s to stop'
                  % (name, time.monotonic() - began))
    left = [n for n, p in layout.PORTS.items() if procs.port_open(p)]
    left_pids = [n for n in procs.started() if procs.pid_of(n)]
    if os.path.isdir(layout.ROOT) and not args.keep:
        # the cloud's libvirt bind mounts lived in its namespace only
        shutil.rmtree(layout.ROOT)
    print('[cloud] down in %.1f s' % (time.monotonic() - start))
    if left or left_pids:
        raise procs.CloudError('still running after down: %s'
                               % ', '.join(left + left_pids))


def agent_stop(args):
    """Stop the vsmtio agent (tempest's ``agent_stop_command``)."""
    procs.stop('vsmtio-agent')


def agent_start(args):
    """Start the vsmtio agent again (tempest's ``agent_start_command``)."""
    services.agent()


def node_stats(args):
    """A compute node's stats as nova saved them (``node_stats_command``).

    The JSON of ``compute_nodes.stats`` in the cell database, which holds
    the node's counted mix: what an operator reads to see a host's mix.
    """
    print(resources.node_stats(args.host))


def run(args):
    status = 1
    try:
        up(args)
        start = time.monotonic()
        status = test(args)
        print('[cloud] tempest: %.1f s, exit %d'
              % (time.monotonic() - start, status))
        status = timed('operator\'s walk', walk, args) or status
        status = observe(args) or status
        status = docs_run(args) or status
    finally:
        if not args.keep_up:
            down(args)
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('command', choices=['up', 'test', 'walk', 'observe',
                                            'down', 'run', 'agent-stop',
                                            'agent-start', 'node-stats'])
    parser.add_argument('--regex', default='vsmtio_tempest_plugin',
                        help='tempest test regex (test, run)')
    parser.add_argument('--concurrency', type=int, default=1)
    parser.add_argument('--no-horizon', action='store_true')
    parser.add_argument('--smoke', action='store_true',
                        help='up: boot and delete one server')
    parser.add_argument('--keep', action='store_true',
                        help='down: keep the logs and data directory')
    parser.add_argument('--keep-up', action='store_true',
                        help='run: leave the cloud up after tempest')
    parser.add_argument('--host',
                        help='node-stats: nova\'s name of the compute host')
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error('the cloud runs libvirtd and installs Debian packages: '
                     'run it as root')
    try:
        return {'up': up, 'test': test, 'walk': walk, 'observe': observe,
                'down': down,
                'run': run, 'agent-stop': agent_stop,
                'agent-start': agent_start,
                'node-stats': node_stats}[args.command](args) or 0
    except procs.CloudError as exc:
        print('[cloud] ERROR: %s' % exc, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
