"""The agent loop's contract with a host driver.

The driver here is a scripted host (a sequence of snapshots) that records
what it is asked to do: the test is about the order and content of the
loop's calls, which no real host could script. The simulated host's own
tests run the same loop against the real simulator.
"""

from oslo_config import fixture as config_fixture
import testtools

from vsmtio_agent import agent
from vsmtio_agent import conf
from vsmtio_agent.drivers import base
from vsmtio_agent import model

MS = 10 ** 6


class ScriptedHost(base.HostDriver):

    def __init__(self, snapshots):
        self.snapshots = list(snapshots)
        self.calls = []
        self.applied = []

    def describe(self):
        return base.HostMode('scripted', 'a test host')

    def topology(self):
        return model.Topology.uniform(2)

    def advance(self, seconds):
        self.calls.append(('advance', seconds))

    def sample(self):
        self.calls.append(('sample',))
        return self.snapshots.pop(0)

    def apply(self, decision):
        self.calls.append(('apply',))
        self.applied.append(decision)
        return base.ApplyResult(applied=1)

    def restore(self):
        self.calls.append(('restore',))

    def close(self):
        self.calls.append(('close',))


def snapshot(t_ms, io_retention_ms):
    io = model.VcpuRef('io-vm', 0)
    cpu = model.VcpuRef('cpu-vm', 0)
    return model.Snapshot(t_ms * MS, {
        io: model.VcpuCounters(cpu=0, run_ns=t_ms * MS,
                               retention_ns=io_retention_ms * MS,
                               retentions=t_ms),
        cpu: model.VcpuCounters(cpu=2, run_ns=t_ms * MS, retention_ns=0,
                                retentions=0, instructions=t_ms * 1000,
                                cycles=t_ms * 1000),
    })


class TestAgentLoop(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cfg = self.useFixture(config_fixture.Config(conf.CONF))
        self.cfg.config(group='vsmtio_agent', period=0.1)

    def test_samples_decides_applies_and_restores(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60),
                             snapshot(200, 120)])
        a = agent.Agent(conf.CONF, host)
        a.run(periods=2)
        self.assertEqual([
            ('advance', 0), ('sample',), ('apply',),
            ('advance', 0.1), ('sample',), ('apply',),
            ('advance', 0.1), ('sample',), ('apply',),
            ('restore',), ('close',)], host.calls)
        first, second, third = host.applied
        # The first apply only puts the initial timeout in force.
        self.assertEqual({}, first.placements)
        self.assertEqual(200 * 1000, first.timeout_ns)
        # Both vCPUs share core 0; the one that retains is I/O-bound and
        # gets the core's I/O sibling.
        io = second.placements[model.VcpuRef('io-vm', 0)]
        cpu = second.placements[model.VcpuRef('cpu-vm', 0)]
        self.assertEqual((model.Role.IO, 2), (io.role, io.home))
        self.assertEqual((model.Role.CPU, 0), (cpu.role, cpu.home))
        self.assertAlmostEqual(
            0.6, a.last_stats[model.VcpuRef('io-vm', 0)].retention_rate)

    def test_dry_run_applies_nothing_but_still_restores(self):
        self.cfg.config(group='vsmtio_agent', dry_run=True)
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.run(periods=1)
        self.assertEqual([], host.applied)
        self.assertIsNotNone(a.last_decision)
        self.assertEqual(('restore',), host.calls[-2])

    def test_stop_restores_once(self):
        host = ScriptedHost([snapshot(0, 0)])
        a = agent.Agent(conf.CONF, host)
        a.stop()
        a.stop()
        self.assertEqual([('restore',), ('close',)], host.calls)
