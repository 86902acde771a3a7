"""The request path on hosts that publish their mix (no instance loaded)."""

from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from nova import test

from vsmtio_contract import workload
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova import mix
from vsmtio_nova.scheduler import filters
from vsmtio_nova.scheduler import hostmix
from vsmtio_nova.scheduler import weights
from vsmtio_nova.tests.unit import base

IO = workload.WorkloadClass.IO
CPU = workload.WorkloadClass.CPU


def published(name, io, cpu, num_instances=0):
    """A HostState refreshed from a node whose MixStats counted io/cpu."""
    return base.host(name, [base.instance(with_flavor=False)] * 3,
                     num_instances=num_instances,
                     stats={mix_stats.IO_VCPUS: str(io),
                            mix_stats.CPU_VCPUS: str(cpu),
                            'num_instances': str(num_instances)})


class SummaryTest(test.NoDBTestCase):

    def test_published_mix_needs_no_instance(self):
        # Flavor-less stubs on a host without a cell: unknown on the
        # fallback path, known from the stats.
        hs = published('h', 6, 2)
        state = hostmix.TRACKER.request(base.spec('io'), [hs])
        self.assertEqual((mix.Mix(6, 2), None), state.mix(hs))
        self.assertNotIn(hostmix.host_key(hs), state._hosts)

    def test_placements_since_the_stats_count_with_their_request(self):
        hs = published('h', 0, 0)
        first = base.spec('io', 4)
        hostmix.TRACKER.request(first, [hs]).mix(hs)
        hs.consume_from_request(first)           # nova chose h for it
        second = base.spec('cpu', 2)
        state = hostmix.TRACKER.request(second, [hs])
        self.assertEqual(mix.Mix(4, 0), state.mix(hs)[0])
        hs.consume_from_request(second)
        self.assertEqual(mix.Mix(4, 2), hostmix.summary(hs, IO, 1))

    def test_refresh_from_the_node_starts_the_ledger_again(self):
        hs = published('h', 0, 0)
        spec = base.spec('io', 4)
        hostmix.summary(hs, IO, 4)
        hs.consume_from_request(spec)
        self.assertEqual(mix.Mix(4, 0), hostmix.summary(hs, IO, 4))
        # The node claimed it and saved its stats; nova reads them anew.
        hs.stats = {mix_stats.IO_VCPUS: '4', mix_stats.CPU_VCPUS: '0',
                    'num_instances': '1'}
        self.assertEqual(mix.Mix(4, 0), hostmix.summary(hs, CPU, 2))

    def test_growth_without_an_observer_is_not_guessed(self):
        hs = published('h', 2, 2)
        hs.consume_from_request(base.spec('io'))  # before anyone looked
        self.assertEqual(mix.Mix(2, 2), hostmix.summary(hs, CPU, 2))

    def test_host_without_summary_falls_back(self):
        hs = base.loaded('h', io=1, cpu=2)
        self.assertIsNone(hostmix.summary(hs, IO, 2))
        state = hostmix.TRACKER.request(base.spec('io'), [hs])
        self.assertEqual((mix.Mix(2, 4), None), state.mix(hs))

    def test_malformed_summary_falls_back(self):
        hs = base.host('h', stats={mix_stats.IO_VCPUS: 'many'})
        self.assertIsNone(hostmix.summary(hs, IO, 2))

    def test_auto_request_marks_the_hosts_it_sees(self):
        # An I/O request looks at h, then an 'auto' request is filtered
        # and weighed on h and placed there: its growth must not count as
        # I/O. (nova skips the weighers when one host is left, so the
        # filter marks the hosts too.)
        for hosts in (1, 2):
            hs = [published('h%d' % i, 2, 2) for i in range(hosts)]
            for h in hs:
                hostmix.summary(h, IO, 4)
            auto = base.spec(None, 4)
            passed = nova_filters.HostFilterHandler().get_filtered_objects(
                [filters.WorkloadMixFilter()], hs, auto, 0)
            nova_weights.HostWeightHandler().get_weighed_objects(
                [weights.WorkloadMixWeigher()], passed, auto)
            hs[0].consume_from_request(auto)
            self.assertEqual(mix.Mix(2, 2), hostmix.summary(hs[0], CPU, 2))
