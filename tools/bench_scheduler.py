#!/usr/bin/env python3
"""Benchmarks of the vsmtio scheduler filter and weigher (print, no assert).

1. Cost: WorkloadMixFilter + WorkloadMixWeigher per host, through nova's
   own filter and weigh handlers, over 1,000 and 10,000 host states, against
   nova's NumInstancesFilter + NumInstancesWeigher on the same host states
   in the same run (pyperf: calibrated loops, worker processes, spread).
   A third run times one request on hosts holding flavor-less stubs
   backed by real (SQLite) cell databases: cold (flavors loaded) and warm
   (served by the scheduler's class cache).
2. Effect: a fleet simulation of 100 hosts fed a seeded random sequence of
   I/O and CPU flavors (arrivals, then churn), placed by nova's default
   weighers alone and with the WorkloadMixWeigher (and filter) added. It
   prints the per-host I/O share distribution: mean distance from the
   target and the share of hosts within +-0.1 of it.

Run: tox -e bench-scheduler [-- --fast | --fleet-only | --seed N |
     --db-hosts N]
"""

import collections
import os
import random
import statistics
import sys
import unittest

import pyperf

# Native threading, nova's concurrency mode from here on (no eventlet); the
# variable keeps nova's test package (used for its databases) from patching.
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

from nova import monkey_patch  # noqa: E402

monkey_patch.patch(backend='threading')

from nova import objects  # noqa: E402

objects.register_all()

from oslo_config import cfg  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

import nova.conf  # noqa: E402,F401
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402

from vsmtio_nova import conf as vsmtio_conf  # noqa: E402,F401
from vsmtio_nova.scheduler import filters  # noqa: E402
from vsmtio_nova.scheduler import hostmix  # noqa: E402
from vsmtio_nova.scheduler import weights  # noqa: E402

CONF = cfg.CONF
CLASSES = ('io', 'cpu', 'auto')
FILTERS = nova_filters.HostFilterHandler()
WEIGHERS = nova_weights.HostWeightHandler()


_FLAVORS = {}


def flavor(cls, vcpus):
    """One shared Flavor object per class and size (like a real cloud)."""
    if (cls, vcpus) not in _FLAVORS:
        _FLAVORS[cls, vcpus] = _new_flavor(cls, vcpus)
    return _FLAVORS[cls, vcpus]


def _new_flavor(cls, vcpus):
    specs = {} if cls == 'auto' else {'vsmtio:workload': cls}
    return objects.Flavor(id=1, flavorid='%s%d' % (cls, vcpus), name='f',
                          vcpus=vcpus, memory_mb=2048 * vcpus, root_gb=10,
                          ephemeral_gb=0, swap=0, extra_specs=specs)


def spec(fl):
    return objects.RequestSpec(
        flavor=fl, num_instances=1, instance_uuid=uuidutils.generate_uuid(),
        pci_requests=None, numa_topology=None, image=None,
        instance_group=None, scheduler_hints={}, requested_destination=None)


class HostState(host_manager.HostState):
    """A real HostState filled like nova's scheduler fakes fill theirs."""

    def __init__(self, name, vcpus, ram_mb):
        super().__init__(name, name, None)
        self.uuid = uuidutils.generate_uuid()
        self.vcpus_total, self.vcpus_used = vcpus, 0
        self.total_usable_ram_mb = self.free_ram_mb = ram_mb
        self.free_disk_mb = 10 ** 7
        self.num_instances = self.num_io_ops = 0
        self.failed_builds = 0
        self.hypervisor_version = 9000000
        self.cpu_allocation_ratio = 1.0
        self.instances = {}

    def place(self, fl):
        inst = objects.Instance(uuid=uuidutils.generate_uuid(), flavor=fl)
        self.instances[inst.uuid] = inst
        self.vcpus_used += fl.vcpus
        self.free_ram_mb -= fl.memory_mb
        self.num_instances += 1

    def remove(self, uuid):
        fl = self.instances.pop(uuid).flavor
        self.vcpus_used -= fl.vcpus
        self.free_ram_mb += fl.memory_mb
        self.num_instances -= 1

    def mix(self):
        io = cpu = 0
        for inst in self.instances.values():
            cls = inst.flavor.extra_specs.get('vsmtio:workload')
            if cls == 'io':
                io += inst.flavor.vcpus
            elif cls == 'cpu':
                cpu += inst.flavor.vcpus
        return io, cpu


# 1. Cost ---------------------------------------------------------------

_FLEETS = {}


def cost_fleet(n):
    """``n`` hosts, each holding 8 instances of random class and size."""
    if n not in _FLEETS:
        rnd = random.Random(n)
        hosts = []
        for i in range(n):
            h = HostState('h%d' % i, 48, 192 * 1024)
            for _ in range(8):
                h.place(flavor(rnd.choice(CLASSES), rnd.choice((1, 2, 4))))
            hosts.append(h)
        _FLEETS[n] = hosts
    return _FLEETS[n]


def plugins(mix):
    if mix:
        return [filters.WorkloadMixFilter()], [weights.WorkloadMixWeigher()]
    return (FILTERS.get_matching_classes(
        ['nova.scheduler.filters.num_instances_filter.NumInstancesFilter'])[0](
    ),), [nova_weights.HostWeightHandler().get_matching_classes(
        ['nova.scheduler.weights.num_instances.NumInstancesWeigher'])[0]()]


def time_requests(loops, n, mix):
    """Seconds for ``loops`` requests (filter then weigh) over ``n`` hosts."""
    hosts = cost_fleet(n)
    flts, wgs = plugins(mix)
    specs = [spec(flavor('io', 2)) for _ in range(loops)]
    t0 = pyperf.perf_counter()
    for sp in specs:   # a new spec per request: no state carried over
        passed = FILTERS.get_filtered_objects(flts, hosts, sp, 0)
        WEIGHERS.get_weighed_objects(wgs, passed, sp)
    return pyperf.perf_counter() - t0


# 1b. The database path ----------------------------------------------

def request_seconds(hosts, flts, wgs):
    sp = spec(flavor('io', 2))
    t0 = pyperf.perf_counter()
    passed = FILTERS.get_filtered_objects(flts, hosts, sp, 0)
    WEIGHERS.get_weighed_objects(wgs, passed, sp)
    return pyperf.perf_counter() - t0


def database_path(n):
    """One request's cost when the hosts hold flavor-less stubs.

    This is what a real scheduler sees: the flavors come from the cell
    database. nova's own TestCase provides the API and cell databases
    (SQLite in memory); the instances are created through nova's objects.
    Cold: the class cache is empty, every instance is loaded (one query
    per 1,000). Warm: a later request, served by the cache.
    """
    from nova import context
    from nova import test

    out = {}

    class DatabasePath(test.TestCase):
        def runTest(self):
            ctxt = context.get_admin_context()
            cell = self.cell_mappings['cell1']
            rnd = random.Random(n)
            hosts = []
            with context.target_cell(ctxt, cell) as cctxt:
                for i in range(n):
                    h = HostState('h%d' % i, 48, 192 * 1024)
                    h.cell_uuid = cell.uuid
                    for _ in range(8):
                        fl = flavor(rnd.choice(CLASSES), rnd.choice((1, 2, 4)))
                        inst = objects.Instance(
                            context=cctxt, uuid=uuidutils.generate_uuid(),
                            host=h.host, project_id='p', user_id='u',
                            vcpus=fl.vcpus, memory_mb=fl.memory_mb,
                            flavor=fl, instance_type_id=fl.id)
                        inst.create()
                        h.instances[inst.uuid] = objects.Instance(
                            uuid=inst.uuid)
                        h.num_instances += 1
                    hosts.append(h)
            flts, wgs = plugins(True)
            hostmix.CACHE.clear()
            out['cold'] = request_seconds(hosts, flts, wgs)
            out['warm'] = min(request_seconds(hosts, flts, wgs)
                              for _ in range(5))
            out['nova'] = min(request_seconds(hosts, *plugins(False))
                              for _ in range(5))

    result = unittest.TestResult()
    DatabasePath().run(result)
    for _test, err in result.errors + result.failures:
        print(err)
        return
    print('\nDatabase path, %d hosts x 8 flavor-less stubs (filter + weigher '
          'per host):' % n)
    print('  cold (cache empty): %.1f us   warm (cached): %.1f us   nova '
          'NumInstances pair: %.1f us' % tuple(
              out[k] / n * 1e6 for k in ('cold', 'warm', 'nova')))
    print('  cold / warm %.0fx, warm / nova %.1fx' % (
        out['cold'] / out['warm'], out['warm'] / out['nova']))


# 2. Effect -------------------------------------------------------------

FLEET_HOSTS = 100
HOST_VCPUS = 48           # 24 SMT cores
HOST_RAM_MB = 192 * 1024
FILL = 0.75               # arrivals until this share of vCPUs is used
CHURN = 1000              # then this many departure + arrival pairs


def simulate(seed, with_weigher, with_filter):
    rnd = random.Random(seed)
    hosts = [HostState('host%03d' % i, HOST_VCPUS, HOST_RAM_MB)
             for i in range(FLEET_HOSTS)]
    flts = [filters.WorkloadMixFilter()] if with_filter else []
    wgs = [cls() for cls in WEIGHERS.get_matching_classes(
        ['nova.scheduler.weights.all_weighers'])]
    if with_weigher:
        wgs.append(weights.WorkloadMixWeigher())
    placed, refused = [], 0

    def arrive():
        nonlocal refused
        fl = flavor(rnd.choice(('io', 'cpu')), rnd.choice((1, 2, 4, 8)))
        sp = spec(fl)
        # Capacity stands in for placement's allocation candidates.
        fit = [h for h in hosts if h.vcpus_total - h.vcpus_used >= fl.vcpus]
        fit = FILTERS.get_filtered_objects(flts, fit, sp, 0)
        if not fit:
            refused += 1
            return
        best = WEIGHERS.get_weighed_objects(wgs, fit, sp)[0].obj
        best.place(fl)
        placed.append((best, list(best.instances)[-1]))

    capacity = FLEET_HOSTS * HOST_VCPUS
    while sum(h.vcpus_used for h in hosts) < FILL * capacity:
        arrive()
    for _ in range(CHURN):
        host, uuid = placed.pop(rnd.randrange(len(placed)))
        host.remove(uuid)
        arrive()
    return hosts, refused


def report(name, hosts, refused, target):
    shares = [io / (io + cpu) for io, cpu in (h.mix() for h in hosts)
              if io + cpu]
    dist = [abs(s - target) for s in shares]
    within = sum(d <= 0.1 + 1e-9 for d in dist) / len(dist)
    hist = collections.Counter(min(int(s * 10), 9) for s in shares)
    print('%-34s mean |share-%.1f| %.3f  max %.3f  within +-0.1 %5.1f%%  '
          'refused %d' % (name, target, statistics.mean(dist), max(dist),
                          100 * within, refused))
    print('%-34s share deciles 0.0..0.9: %s' % (
        '', ' '.join('%3d' % hist.get(i, 0) for i in range(10))))


def fleet(seed):
    target = CONF.vsmtio.target_io_fraction
    print('\nFleet: %d hosts x %d vCPUs, seed %d: arrivals of io/cpu flavors '
          '(1,2,4,8 vCPUs) to %d%% full, then %d departure+arrival pairs'
          % (FLEET_HOSTS, HOST_VCPUS, seed, FILL * 100, CHURN))
    print('filter: [%.1f, %.1f] once a host holds %d classified vCPUs' % (
        CONF.vsmtio.min_io_fraction, CONF.vsmtio.max_io_fraction,
        CONF.vsmtio.filter_min_classified_vcpus))
    for name, w, f in (('nova default weighers', False, False),
                       ('defaults + WorkloadMixWeigher', True, False),
                       ('defaults + weigher + filter', True, True)):
        hosts, refused = simulate(seed, w, f)
        report(name, hosts, refused, target)
    # The filter's own effect: bounds tight enough to bind, weigher off.
    CONF.set_override('min_io_fraction', 0.3, 'vsmtio')
    CONF.set_override('max_io_fraction', 0.7, 'vsmtio')
    CONF.set_override('filter_min_classified_vcpus', 8, 'vsmtio')
    hosts, refused = simulate(seed, False, True)
    report('defaults + filter [0.3, 0.7] >= 8', hosts, refused, target)


def main():
    runner = pyperf.Runner(processes=4, values=3, warmups=1)
    runner.argparser.add_argument('--fleet-only', action='store_true')
    runner.argparser.add_argument('--seed', type=int, default=2020)
    runner.argparser.add_argument('--db-hosts', type=int, default=200,
                                  help='hosts of the database-path run '
                                       '(0 skips it)')
    args = runner.parse_args()
    if not args.fleet_only:
        results = {}
        for n in (1000, 10000):
            for mix in (False, True):
                name = '%s %d hosts' % (
                    'vsmtio filter+weigher' if mix else
                    'nova NumInstances filter+weigher', n)
                results[n, mix] = runner.bench_time_func(
                    name, time_requests, n, mix, inner_loops=n)
        if args.worker:
            return
        print('\nCost per host (filter + weigher through nova\'s handlers):')
        for n in (1000, 10000):
            ours, base = results[n, True].mean(), results[n, False].mean()
            print('  %5d hosts: vsmtio %.2f us, nova NumInstances %.2f us, '
                  'ratio %.1fx' % (n, ours * 1e6, base * 1e6, ours / base))
    elif args.worker:
        return
    fleet(args.seed)
    if args.db_hosts:
        # Last: nova's test base leaves DEBUG logging to stdout behind it.
        database_path(args.db_hosts)


if __name__ == '__main__':
    sys.exit(main())
