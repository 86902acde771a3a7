"""What a run reports: the host's classes are its honest tenants."""

import testtools

from vsmtio_sim import report
from vsmtio_sim.tests import helpers as h


class TestAdversaries(testtools.TestCase):

    def measure(self, adversary):
        sc = h.tiny([('batch', 'cpu', [0]), ('gamer', 'cpu', [1]),
                     ('server', 'io', [0])], duration=0.4, warmup=0.1)
        if adversary:
            sc.vms[1]['adversary'] = True
        sim = h.run(sc, 'vanilla', until_s=0.1)
        start = sim.totals()
        sim.advance_to(0.4e9)
        return report.measure(sim, start, sim.totals(), 0.0)

    def test_an_adversary_is_left_out_of_the_classes(self):
        r = self.measure(adversary=True)
        vms = r['vms']
        self.assertEqual(['gamer'], r['adversaries'])
        self.assertTrue(vms['gamer']['adversary'])
        self.assertGreater(vms['gamer']['instructions_per_s'], 0)
        self.assertAlmostEqual(vms['batch']['instructions_per_s'],
                               r['cpu_throughput'])
        self.assertAlmostEqual(vms['server']['requests_per_s'],
                               r['io_throughput'])

    def test_without_adversaries_every_tenant_counts(self):
        r = self.measure(adversary=False)
        vms = r['vms']
        self.assertEqual([], r['adversaries'])
        self.assertAlmostEqual(
            vms['batch']['instructions_per_s']
            + vms['gamer']['instructions_per_s'], r['cpu_throughput'])
