"""Topology from sysfs: a fake SMT tree, nova's CPU sets, the real host."""

import testtools

from vsmtio_agent.linux import topology
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures


class TestCpuList(testtools.TestCase):

    def test_parse(self):
        self.assertEqual({0, 1, 2, 3, 8},
                         topology.parse_cpu_list('0-3,8'))
        self.assertEqual({0, 1, 3}, topology.parse_cpu_list('0-3, ^2'))
        self.assertEqual(set(), topology.parse_cpu_list(''))

    def test_parse_rejects_garbage(self):
        for bad in ('0-a', '3-1', 'x', '1--2', '^'):
            self.assertRaises(ValueError, topology.parse_cpu_list, bad)

    def test_format_roundtrip(self):
        self.assertEqual('0-3,8,10-11',
                         topology.format_cpu_list({0, 1, 2, 3, 8, 10, 11}))
        self.assertEqual('', topology.format_cpu_list(()))


class TestBuildTopology(testtools.TestCase):

    def test_smt_host_from_fake_sysfs(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4, threads=2))
        topo = topology.build_topology(sysfs.root)
        self.assertTrue(topo.smt)
        self.assertEqual([(0, 4), (1, 5), (2, 6), (3, 7)],
                         [c.threads for c in topo.cores])
        self.assertEqual(0, topo.core_of(4).core_id)

    def test_nova_cpu_sets_bound_the_cores(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=4, threads=2))
        topo = topology.build_topology(sysfs.root,
                                       cpu_dedicated_set='1,5',
                                       cpu_shared_set='2-3,6')
        self.assertEqual([(1, 5), (2, 6), (3,)],
                         [c.threads for c in topo.cores])
        self.assertFalse(topo.smt)

    def test_this_machine(self):
        # The real sysfs: whatever it holds must give a valid topology.
        topo = topology.build_topology('/sys')
        self.assertGreater(len(topo.cores), 0)
        online = topology.online_cpus('/sys')
        self.assertEqual(online,
                         {t for c in topo.cores for t in c.threads})
