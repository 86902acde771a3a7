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

from vsmtio_nova.compute import stats as mix_stats  # noqa: E402
from vsmtio_nova import conf as vsmtio_conf  # noqa: E402,F401
from vsmtio_nova import mix  # noqa: E402
from vsmtio_nova.scheduler import filters  # noqa: E402
from vsmtio_nova.scheduler import hostmix  # noqa: E402
from vsmtio_nova.scheduler import settings  # noqa: E402
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
        self._flavors = {}
        self.instances = {}
        self.io = self.cpu = 0
        self.publish()

    def publish(self):
        """The node's stats as MixStats saves them after a claim.

        A new dict, as nova's refresh from the compute node gives.
        """
        self.stats = {mix_stats.IO_VCPUS: str(self.io),
                      mix_stats.CPU_VCPUS: str(self.cpu),
                      'num_instances': str(self.num_instances)}

    def _count(self, fl, sign):
        cls = fl.extra_specs.get('vsmtio:workload')
        if cls == 'io':
            self.io += sign * fl.vcpus
        elif cls == 'cpu':
            self.cpu += sign * fl.vcpus

    def place(self, fl, stub=False):
        """Place an instance; ``stub``: hold it as the scheduler does."""
        uuid = uuidutils.generate_uuid()
        self.instances[uuid] = objects.Instance(
            uuid=uuid, **({} if stub else {'flavor': fl}))
        self._flavors[uuid] = fl
        self.vcpus_used += fl.vcpus
        self.free_ram_mb -= fl.memory_mb
        self.num_instances += 1
        self._count(fl, 1)
        self.publish()
        return uuid

    def remove(self, uuid):
        del self.instances[uuid]
        fl = self._flavors.pop(uuid)
        self.vcpus_used -= fl.vcpus
        self.free_ram_mb += fl.memory_mb
        self.num_instances -= 1
        self._count(fl, -1)
        self.publish()

    def mix(self):
        return self.io, self.cpu


# 1. Cost ---------------------------------------------------------------

_FLEETS = {}


def cost_fleet(n):
    """``n`` hosts, each holding 8 instances of random class and size.

    The instances are flavor-less stubs, as ``HostState.instances`` holds
    them in a real scheduler: the mix can only come from the hosts' stats.
    """
    if n not in _FLEETS:
        rnd = random.Random(n)
        hosts = []
        for i in range(n):
            h = HostState('h%d' % i, 48, 192 * 1024)
            for _ in range(8):
                h.place(flavor(rnd.choice(CLASSES), rnd.choice((1, 2, 4))),
                        stub=True)
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


def forget(hosts):
    """A cold scheduler: no ledger on any host state, no class cache."""
    hostmix.CACHE.clear()
    for h in hosts:
        h.__dict__.pop('_vsmtio_ledger', None)


def time_requests(loops, n, mode):
    """Seconds for ``loops`` requests (filter then weigh) over ``n`` hosts.

    ``mode``: ``nova`` (NumInstances pair), ``warm`` (vsmtio, host states
    seen by earlier requests) or ``cold`` (vsmtio, every request on host
    states no request has seen: the first request of a fresh scheduler).
    Only the requests are timed.
    """
    hosts = cost_fleet(n)
    flts, wgs = plugins(mode != 'nova')
    specs = [spec(flavor('io', 2)) for _ in range(loops)]
    elapsed = 0.0
    for sp in specs:   # a new spec per request: no state carried over
        if mode == 'cold':
            forget(hosts)
        t0 = pyperf.perf_counter()
        passed = FILTERS.get_filtered_objects(flts, hosts, sp, 0)
        WEIGHERS.get_weighed_objects(wgs, passed, sp)
        elapsed += pyperf.perf_counter() - t0
    return elapsed


# 1b. The database path ----------------------------------------------

def request_seconds(hosts, flts, wgs):
    sp = spec(flavor('io', 2))
    t0 = pyperf.perf_counter()
    passed = FILTERS.get_filtered_objects(flts, hosts, sp, 0)
    WEIGHERS.get_weighed_objects(wgs, passed, sp)
    return pyperf.perf_counter() - t0


def database_path(n):
    """One request's cost on hosts in a real cell database.

    nova's own TestCase provides the API and cell databases (SQLite in
    memory); the instances are created through nova's objects and the
    host states hold flavor-less stubs. With the hosts' stats (``summary``)
    nothing is loaded, cold or warm; without them (a compute without
    ``MixStats``) the fallback loads every instance, cold.
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
                        uuid = h.place(fl, stub=True)
                        objects.Instance(
                            context=cctxt, uuid=uuid, host=h.host,
                            project_id='p', user_id='u', vcpus=fl.vcpus,
                            memory_mb=fl.memory_mb, flavor=fl,
                            instance_type_id=fl.id).create()
                    hosts.append(h)
            flts, wgs = plugins(True)

            def cold():
                forget(hosts)
                return request_seconds(hosts, flts, wgs)

            # Each the best of 5 requests; cold ones on forgotten hosts.
            out['cold'] = min(cold() for _ in range(5))
            out['warm'] = min(request_seconds(hosts, flts, wgs)
                              for _ in range(5))
            out['nova'] = min(request_seconds(hosts, *plugins(False))
                              for _ in range(5))
            for h in hosts:
                h.stats = {}
            out['fallback'] = min(cold() for _ in range(3))

    result = unittest.TestResult()
    DatabasePath().run(result)
    for _test, err in result.errors + result.failures:
        print(err)
        return
    print('\nDatabase path, %d hosts x 8 flavor-less stubs (filter + weigher '
          'per host):' % n)
    print('  with the hosts\' stats: cold %.1f us, warm %.1f us; nova '
          'NumInstances pair %.1f us' % tuple(
              out[k] / n * 1e6 for k in ('cold', 'warm', 'nova')))
    print('  cold / nova %.2fx, warm / nova %.2fx' % (
        out['cold'] / out['nova'], out['warm'] / out['nova']))
    print('  without them (fallback, loads every instance): cold %.1f us '
          '(%.0fx nova)' % (out['fallback'] / n * 1e6,
                            out['fallback'] / out['nova']))


# 2. Effect -------------------------------------------------------------

FLEET_HOSTS = 100
HOST_VCPUS = 48           # 24 SMT cores
HOST_RAM_MB = 192 * 1024
FILL = 0.75               # arrivals until this share of vCPUs is used
CHURN = 1000              # then this many departure + arrival pairs


class EndStateWeigher(weights.WorkloadMixWeigher):
    """The previous release's scoring, for comparison only.

    Minus the distance from the target of the host's share after placing
    (one pseudo-vCPU at the target), i.e. where the host ends rather than
    what the placement changes.
    """

    @staticmethod
    def _weight(state, opts, host_state):
        current, _why = state.mix(host_state)
        if not state.classified:
            return 0.0
        after = (current or mix.Mix()).plus(state.cls, state.vcpus)
        target = settings.target(host_state, opts)
        return -abs((after.io + target) / (after.classified + 1) - target)


def arrivals(rnd, n_hosts, order):
    """Flavors arriving until FILL of the vCPUs is asked for, in ``order``.

    ``random``: as drawn. ``io_then_cpu`` / ``cpu_then_io``: the same kind
    of draw, each class in one burst (a tenant's forty I/O servers, then
    its forty batch servers).
    """
    out, total = [], 0
    while total < FILL * n_hosts * HOST_VCPUS:
        fl = flavor(rnd.choice(('io', 'cpu')), rnd.choice((1, 2, 4, 8)))
        out.append(fl)
        total += fl.vcpus
    first = {'io_then_cpu': 'io', 'cpu_then_io': 'cpu'}.get(order)
    if first:
        out.sort(key=lambda f: f.extra_specs['vsmtio:workload'] != first)
    return out


def simulate(seed, n_hosts, order, weigher, with_filter, nova_weighers=True,
             churn=CHURN):
    """Place an order of arrivals (then churn) the way nova would.

    ``weigher``: None, ``'end'`` (:class:`EndStateWeigher`) or ``'mix'``.
    """
    rnd = random.Random(seed)
    hosts = [HostState('host%04d' % i, HOST_VCPUS, HOST_RAM_MB)
             for i in range(n_hosts)]
    flts = [filters.WorkloadMixFilter()] if with_filter else []
    wgs = [cls() for cls in WEIGHERS.get_matching_classes(
        ['nova.scheduler.weights.all_weighers'])] if nova_weighers else []
    if weigher == 'end':
        wgs.append(EndStateWeigher())
    elif weigher == 'mix':
        wgs.append(weights.WorkloadMixWeigher())
    placed, refused = [], 0

    def arrive(fl):
        nonlocal refused
        sp = spec(fl)
        # Capacity stands in for placement's allocation candidates.
        fit = [h for h in hosts if h.vcpus_total - h.vcpus_used >= fl.vcpus]
        fit = FILTERS.get_filtered_objects(flts, fit, sp, 0)
        if not fit:
            refused += 1
            return
        best = WEIGHERS.get_weighed_objects(wgs, fit, sp)[0].obj
        placed.append((best, best.place(fl)))

    for fl in arrivals(rnd, n_hosts, order):
        arrive(fl)
    for _ in range(churn):
        host, uuid = placed.pop(rnd.randrange(len(placed)))
        host.remove(uuid)
        arrive(flavor(rnd.choice(('io', 'cpu')), rnd.choice((1, 2, 4, 8))))
    return hosts, refused


def report(name, hosts, refused, target):
    low, high = CONF.vsmtio.min_io_fraction, CONF.vsmtio.max_io_fraction
    judged = CONF.vsmtio.filter_min_classified_vcpus
    shares = [io / (io + cpu) for io, cpu in (h.mix() for h in hosts)
              if io + cpu]
    outside = sum(1 for io, cpu in (h.mix() for h in hosts)
                  if io + cpu >= judged
                  and not low <= io / (io + cpu) <= high)
    dist = [abs(s - target) for s in shares]
    within = sum(d <= 0.1 + 1e-9 for d in dist) / len(dist)
    hist = collections.Counter(min(int(s * 10), 9) for s in shares)
    print('%-36s mean |share-%.1f| %.3f  max %.3f  within +-0.1 %5.1f%%  '
          'outside band %d  refused %d' % (
              name, target, statistics.mean(dist), max(dist), 100 * within,
              outside, refused))
    print('%-36s share deciles 0.0..0.9: %s' % (
        '', ' '.join('%3d' % hist.get(i, 0) for i in range(10))))


def fleet(seed, big_hosts):
    target = CONF.vsmtio.target_io_fraction
    print('\nFleet: %d hosts x %d vCPUs, seed %d: arrivals of io/cpu flavors '
          '(1,2,4,8 vCPUs) to %d%% full, in random order then %d '
          'departure+arrival pairs, or in class bursts' % (
              FLEET_HOSTS, HOST_VCPUS, seed, FILL * 100, CHURN))
    print('filter: [%.1f, %.1f] once a host holds %d classified vCPUs; '
          '"outside band" counts such hosts outside it at the end' % (
              CONF.vsmtio.min_io_fraction, CONF.vsmtio.max_io_fraction,
              CONF.vsmtio.filter_min_classified_vcpus))
    configs = (('nova default weighers', None, False),
               ('defaults + end-state weigher (old)', 'end', False),
               ('defaults + WorkloadMixWeigher', 'mix', False),
               ('defaults + weigher + filter', 'mix', True))
    for order in ('random', 'io_then_cpu', 'cpu_then_io'):
        # The adversarial orders end right after the bursts: departures and
        # later arrivals would repair what a burst stranded.
        churn = CHURN if order == 'random' else 0
        print('order: %s, churn %d' % (order, churn))
        for name, w, f in configs:
            hosts, refused = simulate(seed, FLEET_HOSTS, order, w, f,
                                      churn=churn)
            report(name, hosts, refused, target)
    if big_hosts:
        print('\nFleet: %d hosts, order io_then_cpu, no churn; vsmtio '
              'weigher + filter alone (nova\'s weighers left out to keep '
              'the run short)' % big_hosts)
        for name, w, f in (('end-state weigher (old)', 'end', False),
                           ('weigher + filter', 'mix', True)):
            hosts, refused = simulate(seed, big_hosts, 'io_then_cpu', w, f,
                                      nova_weighers=False, churn=0)
            report(name, hosts, refused, target)


def main():
    # pyperf's workers run this module again, not the vsmtio-bench command
    runner = pyperf.Runner(processes=4, values=3, warmups=1,
                           program_args=('-m', __spec__.name))
    runner.argparser.add_argument('--fleet-only', action='store_true')
    runner.argparser.add_argument('--seed', type=int, default=2020)
    runner.argparser.add_argument('--big-fleet', type=int, default=1000,
                                  help='hosts of the large adversarial '
                                       'fleet run (0 skips it)')
    runner.argparser.add_argument('--db-hosts', type=int, default=200,
                                  help='hosts of the database-path run '
                                       '(0 skips it)')
    args = runner.parse_args()
    if not args.fleet_only:
        results = {}
        for n in (1000, 10000):
            for mode in ('nova', 'warm', 'cold'):
                name = '%s %d hosts' % (
                    'nova NumInstances filter+weigher' if mode == 'nova'
                    else 'vsmtio filter+weigher %s' % mode, n)
                results[n, mode] = runner.bench_time_func(
                    name, time_requests, n, mode, inner_loops=n)
        if args.worker:
            return
        print('\nCost per host (filter + weigher through nova\'s handlers):')
        for n in (1000, 10000):
            base = results[n, 'nova'].mean()
            warm = results[n, 'warm'].mean()
            cold = results[n, 'cold'].mean()
            print('  %5d hosts: nova NumInstances %.2f us; vsmtio warm %.2f '
                  'us (%.2fx), cold %.2f us (%.2fx)' % (
                      n, base * 1e6, warm * 1e6, warm / base, cold * 1e6,
                      cold / base))
    elif args.worker:
        return
    fleet(args.seed, args.big_fleet)
    if args.db_hosts:
        # Last: nova's test base leaves DEBUG logging to stdout behind it.
        database_path(args.db_hosts)


if __name__ == '__main__':
    sys.exit(main())
