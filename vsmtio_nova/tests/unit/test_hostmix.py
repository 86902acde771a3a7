"""The per-request view of host mixes against nova's real cell databases."""

import logging
import time

import fixtures
from oslo_utils import uuidutils

from nova import context
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from nova import test

from vsmtio_contract import workload
from vsmtio_nova import mix
from vsmtio_nova.scheduler import filters
from vsmtio_nova.scheduler import hostmix
from vsmtio_nova.scheduler import weights
from vsmtio_nova.tests.unit import base


class RequestMixesDBTest(test.TestCase):
    """nova's TestCase gives an API database and cell0 + cell1 databases."""

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='vsmtio_nova', level=logging.DEBUG))
        self.ctxt = context.get_admin_context()
        self.cell = self.cell_mappings['cell1']
        # Count the batch queries; the spy calls the real method. (fixtures
        # keeps a patched classmethod a classmethod: hence ``cls``.)
        self.queries = []
        real = objects.InstanceList.get_by_filters

        def counting(cls, ctxt, filters, *args, **kwargs):
            self.queries.append(sorted(filters['uuid']))
            return real(ctxt, filters, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.InstanceList.get_by_filters', counting))
        self.flags(min_io_fraction=0.25, max_io_fraction=0.75,
                   filter_min_classified_vcpus=4, group='vsmtio')
        hostmix.CACHE.clear()
        self.addCleanup(hostmix.CACHE.clear)
        hostmix.MEASURED.clear()
        self.addCleanup(hostmix.MEASURED.clear)

    def create(self, host, cls, vcpus=2, cell=None, metadata=None):
        """An instance in a cell database; the host state gets a stub."""
        flavor = base.flavor(cls, vcpus)
        with context.target_cell(self.ctxt, cell or self.cell) as cctxt:
            inst = objects.Instance(
                context=cctxt, uuid=uuidutils.generate_uuid(),
                host=host.host, project_id='p',
                user_id='u', vcpus=vcpus, memory_mb=512, flavor=flavor,
                instance_type_id=flavor.id, metadata=metadata or {})
            inst.create()
        host.instances[inst.uuid] = objects.Instance(uuid=inst.uuid)
        host.num_instances += 1
        return inst

    def host(self, name, cell=None):
        return base.host(name, cell_uuid=(cell or self.cell).uuid)

    def test_flavors_load_in_one_batch_per_request(self):
        hosts = [self.host('h%d' % i) for i in range(5)]
        for i, h in enumerate(hosts):
            for _ in range(i):
                self.create(h, 'io' if i % 2 else 'cpu')
            self.create(h, None)
        spec = base.spec('io')
        filt = filters.WorkloadMixFilter()
        weigher = weights.WorkloadMixWeigher()
        handler = nova_weights.HostWeightHandler()
        for index in range(3):   # a multi-create: filter + weigh, 3 times
            passed = list(nova_filters.HostFilterHandler()
                          .get_filtered_objects([filt], hosts, spec, index))
            best = handler.get_weighed_objects([weigher], passed, spec)[0]
            best.obj.consume_from_request(spec)
            spec.instance_uuid = uuidutils.generate_uuid()
        self.assertEqual(1, len(self.queries))
        self.assertEqual(sum(len(h.instances) for h in hosts),
                         len(self.queries[0]))

    def test_later_requests_reuse_loaded_classes(self):
        hosts = [self.host('h%d' % i) for i in range(3)]
        for h in hosts:
            self.create(h, 'io')
            self.create(h, 'cpu', 4)
        first = hostmix.TRACKER.request(base.spec('io'), hosts)
        self.assertEqual(1, len(self.queries))
        second = hostmix.TRACKER.request(base.spec('cpu'), hosts)
        self.assertEqual(1, len(self.queries))
        for h in hosts:
            self.assertEqual(first.mix(h), second.mix(h))
            self.assertEqual((mix.Mix(2, 4), None), second.mix(h))
        # A new instance is loaded alone.
        self.create(hosts[0], 'io')
        hostmix.TRACKER.request(base.spec('io'), hosts)
        self.assertEqual(2, len(self.queries))
        self.assertEqual(1, len(self.queries[1]))

    def test_cache_off_loads_every_request(self):
        self.flags(instance_class_cache_seconds=0, group='vsmtio')
        h = self.host('h')
        self.create(h, 'io')
        hostmix.TRACKER.request(base.spec('io'), [h])
        hostmix.TRACKER.request(base.spec('io'), [h])
        self.assertEqual(2, len(self.queries))
        self.assertEqual(0, len(hostmix.CACHE))

    def test_mix_of_loaded_instances(self):
        h = self.host('h')
        self.create(h, 'io', 4)
        self.create(h, 'cpu', 2)
        self.create(h, 'cpu', 1)
        self.create(h, None, 8)        # auto: not counted
        gone = self.create(h, 'io', 8)
        with context.target_cell(self.ctxt, self.cell) as cctxt:
            gone._context = cctxt
            gone.destroy()             # deleted since the host state
        state = hostmix.TRACKER.request(base.spec('cpu'), [h])
        self.assertEqual((mix.Mix(4, 3), None), state.mix(h))

    def test_instances_already_carrying_flavors_need_no_query(self):
        h = base.loaded('h', io=2, cpu=1, cell_uuid=self.cell.uuid)
        state = hostmix.TRACKER.request(base.spec('io'), [h])
        self.assertEqual((mix.Mix(4, 2), None), state.mix(h))
        self.assertEqual([], self.queries)

    def test_unmapped_cell_fails_open(self):
        h = self.host('h')
        for _ in range(4):
            self.create(h, 'io')
        h.cell_uuid = uuidutils.generate_uuid()
        spec = base.spec('io')
        self.assertTrue(filters.WorkloadMixFilter().host_passes(h, spec))
        self.assertIn('fail open', self.log.output)
        self.assertIn('is not mapped', self.log.output)
        # The same host in its real cell is judged, and fails.
        h.cell_uuid = self.cell.uuid
        self.assertFalse(filters.WorkloadMixFilter().host_passes(
            h, base.spec('io')))

    def test_unreachable_cell_database_fails_open(self):
        # A cell mapped in the API database whose database nova's cell
        # fixture does not serve: loading raises, the host stays unknown.
        broken = objects.CellMapping(
            context=self.ctxt, uuid=uuidutils.generate_uuid(),
            name='broken', transport_url='fake://nowhere/',
            database_connection='no-such-database')
        broken.create()
        h = self.host('h')
        for _ in range(4):
            self.create(h, 'io')
        h.cell_uuid = broken.uuid
        state = hostmix.TRACKER.request(base.spec('io'), [h])
        current, why = state.mix(h)
        self.assertIsNone(current)
        self.assertIn('loading flavors failed', why)
        self.assertTrue(filters.WorkloadMixFilter().host_passes(
            h, base.spec('io')))

    def test_resize_on_same_host_does_not_count_the_instance_twice(self):
        # During a resize the instance sits on its source host with its old
        # flavor; the request (new flavor) replaces it in the mix.
        h = self.host('h')
        self.create(h, 'cpu', 2)
        moving = self.create(h, 'io', 2)
        spec = base.spec('io', 4, instance_uuid=moving.uuid)
        state = hostmix.TRACKER.request(spec, [h])
        self.assertEqual((mix.Mix(0, 2), None), state.mix(h))

    def set_metadata(self, inst, metadata):
        """What the owner does through the API: the row changes."""
        with context.target_cell(self.ctxt, self.cell) as cctxt:
            inst._context = cctxt
            inst.metadata = metadata
            inst.save()

    def test_measured_classes_count_and_a_deleted_key_changes_nothing(self):
        # Hosts without a published mix: the scheduler counts an auto
        # instance as its compute would, with the class signed with the
        # key of its host, derived from the root secret.
        self.flags(measured_class_secret='root', group='vsmtio')
        key = workload.derive_host_key('root', 'h')
        expires = int(time.time()) + 600

        def signed(inst, cls, key=key, host='h'):
            return {workload.MEASURED_CLASS_KEY: workload.sign_measured(
                key, inst.uuid, cls, host, expires)}

        h = self.host('h')
        auto = self.create(h, None, 4)
        self.set_metadata(auto, signed(auto, 'io'))
        self.create(h, 'cpu', 2)
        state = hostmix.TRACKER.request(base.spec('cpu'), [h])
        self.assertEqual((mix.Mix(4, 2), None), state.mix(h))
        other = workload.derive_host_key('root', 'h2')
        for meta in ({},                                  # deleted
                     signed(auto, 'cpu', key='a-guess'),  # made up
                     signed(auto, 'cpu', key=other),      # h2's key
                     signed(auto, 'cpu', key=other, host='h2')):
            self.set_metadata(auto, meta)
            for ttl in (300, 0):       # reused from the cache, reloaded
                self.flags(instance_class_cache_seconds=ttl, group='vsmtio')
                state = hostmix.TRACKER.request(base.spec('cpu'), [h])
                self.assertEqual((mix.Mix(4, 2), None), state.mix(h), meta)

    def test_cache_entries_expire(self):
        cache = hostmix.ClassCache()
        value = (workload.WorkloadClass.IO, 2)
        cache.put('a', value, now=100.0)
        self.assertEqual(value, cache.get('a', 399.0, 300))
        self.assertIsNone(cache.get('a', 400.0, 300))
        cache.put('b', value, now=350.0)
        cache.prune(now=1000.0, ttl=300)
        self.assertEqual(0, len(cache))

    def test_state_lives_as_long_as_the_request_spec(self):
        tracker = hostmix.Tracker()
        spec = base.spec('io')
        first = tracker.request(spec, [])
        self.assertIs(first, tracker.request(spec, []))
        self.assertIsNot(first, tracker.request(base.spec('io'), []))
        del spec
        self.assertEqual(0, len(tracker._requests))
