"""Placement holds under any arrival order (property-based, hypothesis).

Every arrival goes through nova's real ``HostFilterHandler`` and
``HostWeightHandler`` over real ``HostState`` objects; the chosen host
consumes the request with nova's own ``consume_from_request``, and hosts
publish their mix in their stats as
:class:`~vsmtio_nova.compute.stats.MixStats` would, every few placements
(the scheduler counts its own placements in between). Capacity (free
vCPUs) stands in for placement's allocation candidates.
"""

import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from oslo_utils import uuidutils

from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager
from nova.scheduler import weights as nova_weights
from nova import test

from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova.scheduler import filters
from vsmtio_nova.scheduler import weights
from vsmtio_nova.tests.unit import base

HOST_VCPUS = 48
FILL = 0.75
T0 = datetime.datetime(2020, 7, 15)


class Host(host_manager.HostState):
    """A real HostState with the fields a compute node would fill."""

    def __init__(self, name, summary=True):
        super().__init__(name, name, None)
        self.summary = summary
        self.instances = {}
        self.vcpus_total, self.vcpus_used = HOST_VCPUS, 0
        self.cpu_allocation_ratio = 1.0
        self.total_usable_ram_mb = self.free_ram_mb = 10 ** 7
        self.free_disk_mb = 10 ** 9
        self.num_instances = 0
        self.updated = T0
        self.io = self.cpu = 0   # the host's true mix
        self.publish()

    def claim(self, cls, vcpus):
        if cls == 'io':
            self.io += vcpus
        else:
            self.cpu += vcpus
        if not self.summary:
            # A node without MixStats: the scheduler learns of the
            # instance (with its flavor) through track_instance_changes.
            inst = base.instance(cls, vcpus)
            self.instances[inst.uuid] = inst

    def publish(self):
        """What the compute's resource tracker saves after its claims."""
        self.stats = {'num_instances': str(self.num_instances)}
        if self.summary:
            self.stats.update({mix_stats.IO_VCPUS: str(self.io),
                               mix_stats.CPU_VCPUS: str(self.cpu)})
        self.updated += datetime.timedelta(seconds=1)

    def share(self):
        return self.io / (self.io + self.cpu) if self.io + self.cpu else None


def spec_of(cls, vcpus):
    return objects.RequestSpec(
        flavor=base.flavor(cls, vcpus), num_instances=1,
        instance_uuid=uuidutils.generate_uuid(), pci_requests=None,
        numa_topology=None, image=None, instance_group=None,
        scheduler_hints={}, requested_destination=None)


SIZES = st.sampled_from((1, 2, 4, 8))


@st.composite
def arrivals(draw, low=0.3, high=0.7, per_host=0, sizes=SIZES):
    """A fleet and an order of I/O and CPU arrivals that fits in it.

    The fleet's own I/O share stays within ``[low, high]``, its vCPUs
    within capacity, and at least ``per_host`` classified vCPUs arrive per
    host: only then can every host end within the filter's band. The
    order is drawn from the adversarial ones (each class in one burst,
    largest first or last) and from arbitrary permutations.
    """
    hosts = draw(st.integers(2, 12))
    budget = int(hosts * HOST_VCPUS * FILL)
    total = draw(st.integers(max(per_host * hosts, 2), budget))
    io_vcpus = round(total * draw(st.floats(low, high)))
    sizes = iter(draw(st.lists(sizes, min_size=budget, max_size=budget)))

    def take(vcpus):
        out = []
        while sum(out) < vcpus:
            out.append(min(next(sizes), vcpus - sum(out)))
        return out

    io, cpu = take(io_vcpus), take(total - io_vcpus)
    items = [('io', v) for v in io] + [('cpu', v) for v in cpu]
    order = draw(st.sampled_from(
        ('io_first', 'cpu_first', 'big_first', 'small_first', 'any')))
    if order == 'io_first':
        items.sort(key=lambda i: i[0] != 'io')
    elif order == 'cpu_first':
        items.sort(key=lambda i: i[0] != 'cpu')
    elif order == 'big_first':
        items.sort(key=lambda i: (i[0] != 'io', -i[1]))
    elif order == 'small_first':
        items.sort(key=lambda i: (i[0] != 'io', i[1]))
    else:
        items = draw(st.permutations(items))
    publish_every = draw(st.sampled_from((1, 7, 10 ** 6)))
    return hosts, items, publish_every


class AnyOrderTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.filters = [filters.WorkloadMixFilter()]
        self.weighers = [weights.WorkloadMixWeigher()]
        self.fh = nova_filters.HostFilterHandler()
        self.wh = nova_weights.HostWeightHandler()

    def place_all(self, hosts, items, publish_every):
        refused = []
        for n, (cls, vcpus) in enumerate(items, 1):
            spec = spec_of(cls, vcpus)
            fit = [h for h in hosts
                   if h.vcpus_total - h.vcpus_used >= vcpus]
            fit = self.fh.get_filtered_objects(self.filters, fit, spec, 0)
            if not fit:
                refused.append((cls, vcpus))
                continue
            best = self.wh.get_weighed_objects(
                self.weighers, fit, spec)[0].obj
            best.consume_from_request(spec)
            best.claim(cls, vcpus)
            if n % publish_every == 0:
                for h in hosts:
                    h.publish()
        return refused

    def assert_within_bounds(self, hosts, low, high, min_classified):
        for h in hosts:
            if h.io + h.cpu >= min_classified:
                self.assertTrue(
                    low <= h.share() <= high,
                    '%s ends at io=%d cpu=%d vCPUs, share %.3f outside '
                    '[%s, %s]: %s' % (h.host, h.io, h.cpu, h.share(), low,
                                      high, [(x.io, x.cpu) for x in hosts]))

    @settings(max_examples=150, deadline=None)
    @given(arrivals(0.3, 0.7))
    def test_every_host_ends_within_bounds(self, case):
        nhosts, items, publish_every = case
        hosts = [Host('h%02d' % i) for i in range(nhosts)]
        refused = self.place_all(hosts, items, publish_every)
        self.assertEqual([], refused)
        self.assert_within_bounds(hosts, 0.1, 0.9, 16)

    @settings(max_examples=60, deadline=None)
    @given(arrivals(0.3, 0.7))
    def test_hosts_without_summary_hold_too(self, case):
        # Nodes not run by vsmtio-nova-compute: the mix is counted from
        # the instances the scheduler holds (the fallback path).
        nhosts, items, publish_every = case
        hosts = [Host('h%02d' % i, summary=False) for i in range(nhosts)]
        refused = self.place_all(hosts, items, publish_every)
        self.assertEqual([], refused)
        self.assert_within_bounds(hosts, 0.1, 0.9, 16)

    def assert_recoverable(self, hosts, low, high, min_classified):
        """Every judged host is within the band or can still get back.

        The filter's guarantee (mix.violates): a host with room may pass
        through the band while a burst of one class arrives, as long as
        filling its free vCPUs with the other class brings it back.
        """
        for h in hosts:
            io, cpu = h.io, h.cpu
            if io + cpu < min_classified or low <= h.share() <= high:
                continue
            free = h.vcpus_total - h.vcpus_used
            # filling the room with the other class sweeps the share from
            # where it is to ``best``: it must cross the band on the way
            if h.share() > high:
                best = io / (io + cpu + free)
                back = best <= high
            else:
                best = (io + free) / (io + cpu + free)
                back = best >= low
            self.assertTrue(
                back,
                '%s ends at io=%d cpu=%d vCPUs, share %.3f, and its %d free '
                'vCPUs cannot bring it within [%s, %s]: %s'
                % (h.host, io, cpu, h.share(), free, low, high,
                   [(x.io, x.cpu) for x in hosts]))

    @settings(max_examples=100, deadline=None)
    @given(arrivals(0.4, 0.6, per_host=16, sizes=st.sampled_from((1, 2))))
    def test_tight_band_stays_recoverable_for_small_flavors(self, case):
        # A band of [0.3, 0.7] judged from 8 classified vCPUs on. Ending
        # within it is not guaranteed: hypothesis found an order whose last
        # arrivals, all I/O, took a host from io=4 cpu=2 (not yet judged)
        # to io=6 cpu=2 with 40 vCPUs free and nothing left to come. What
        # holds is the filter's own guarantee: every judged host can still
        # get back within the band with the room it has left.
        self.flags(min_io_fraction=0.3, max_io_fraction=0.7,
                   filter_min_classified_vcpus=8, group='vsmtio')
        nhosts, items, publish_every = case
        hosts = [Host('h%02d' % i) for i in range(nhosts)]
        refused = self.place_all(hosts, items, publish_every)
        self.assertEqual([], refused)
        self.assert_recoverable(hosts, 0.3, 0.7, 8)
