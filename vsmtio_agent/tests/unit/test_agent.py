"""The agent loop's contract with a host driver.

The driver here is a scripted host (a sequence of snapshots) that records
what it is asked to do: the test is about the order and content of the
loop's calls, which no real host could script. The simulated host's own
tests run the same loop against the real simulator.
"""

import dataclasses
import json
import socket

import fixtures
import jsonschema
from oslo_config import fixture as config_fixture
import testtools

from vsmtio_agent import agent
from vsmtio_agent import conf
from vsmtio_agent.drivers import base
from vsmtio_agent import metrics
from vsmtio_agent import model
from vsmtio_agent.policy import mist
from vsmtio_agent.policy import search
from vsmtio_agent import status

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

    def preview(self, decision):
        self.calls.append(('preview',))
        return ['vCPU %d pins of %s: 0-1 -> %d' % (
            ref.index, ref.domain, p.core_id)
            for ref, p in sorted(decision.placements.items())]


def snapshot(t_ms, io_retention_ms, projects=('tenant', 'tenant')):
    """Two VMs on core 0, of one tenant unless ``projects`` says."""
    io = model.VcpuRef('io-vm', 0)
    cpu = model.VcpuRef('cpu-vm', 0)
    return model.Snapshot(t_ms * MS, {
        io: model.VcpuCounters(cpu=0, run_ns=t_ms * MS,
                               retention_ns=io_retention_ms * MS,
                               retentions=t_ms),
        cpu: model.VcpuCounters(cpu=2, run_ns=t_ms * MS, retention_ns=0,
                                retentions=0, instructions=t_ms * 1000,
                                cycles=t_ms * 1000),
    }, tenancy={'io-vm': model.Tenancy(project=projects[0]),
                'cpu-vm': model.Tenancy(project=projects[1])})


class AgentTestCase(testtools.TestCase):
    """The agent's configuration, a 0.1 s period, reset after each test."""

    def setUp(self):
        super().setUp()
        self.cfg = self.useFixture(config_fixture.Config(conf.CONF))
        self.cfg.config(group='vsmtio_agent', period=0.1)


class TestAgentLoop(AgentTestCase):

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
        # The first apply only puts the switches in force: with the guard
        # (the default) nothing is kept yet, so no VM retains, and its
        # timeout ladder starts at the cost of a deschedule
        self.assertEqual({}, first.placements)
        self.assertEqual((50 * 1000, 0), (first.timeout_ns,
                                          first.retains('io-vm')))
        # Both vCPUs share core 0; the one that retains is I/O-bound and
        # gets the core's I/O sibling.
        io = second.placements[model.VcpuRef('io-vm', 0)]
        cpu = second.placements[model.VcpuRef('cpu-vm', 0)]
        self.assertEqual((model.Role.IO, 2), (io.role, io.home))
        self.assertEqual((model.Role.CPU, 0), (cpu.role, cpu.home))
        self.assertAlmostEqual(
            0.6, a.last_stats[model.VcpuRef('io-vm', 0)].retention_rate)

    def test_two_tenants_never_share_a_core(self):
        # The default trust domain is the project: the agent moves one of
        # two tenants' vCPUs off the core they shared.
        host = ScriptedHost([snapshot(0, 0, ('a', 'b')),
                             snapshot(100, 60, ('a', 'b')),
                             snapshot(200, 120, ('a', 'b'))])
        agent.Agent(conf.CONF, host).run(periods=2)
        for decision in host.applied[1:]:
            io = decision.placements[model.VcpuRef('io-vm', 0)]
            cpu = decision.placements[model.VcpuRef('cpu-vm', 0)]
            self.assertNotEqual(io.core_id, cpu.core_id)

    def test_any_pairs_two_tenants_as_the_paper_does(self):
        self.cfg.config(group='vsmtio_agent', trust_domain='any')
        host = ScriptedHost([snapshot(0, 0, ('a', 'b')),
                             snapshot(100, 60, ('a', 'b')),
                             snapshot(200, 120, ('a', 'b'))])
        agent.Agent(conf.CONF, host).run(periods=2)
        io = host.applied[1].placements[model.VcpuRef('io-vm', 0)]
        cpu = host.applied[1].placements[model.VcpuRef('cpu-vm', 0)]
        self.assertEqual((0, 0), (io.core_id, cpu.core_id))

    def test_dry_run_applies_nothing_but_still_restores(self):
        self.cfg.config(group='vsmtio_agent', dry_run=True)
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.run(periods=1)
        self.assertEqual([], host.applied)
        self.assertIsNotNone(a.last_decision)
        self.assertEqual(('restore',), host.calls[-2])

    def test_dry_run_lists_the_changes_it_would_make(self):
        self.cfg.config(group='vsmtio_agent', dry_run=True)
        logger = self.useFixture(fixtures.FakeLogger(name='vsmtio_agent'))
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        agent.Agent(conf.CONF, host).run(periods=1)
        self.assertEqual([], host.applied)
        self.assertIn('dry run: would change vCPU 0 pins of io-vm: 0-1 -> 0',
                      logger.output)
        self.assertIn('dry run: would change vCPU 0 pins of cpu-vm: 0-1 -> '
                      '0', logger.output)

    def test_stop_restores_once(self):
        host = ScriptedHost([snapshot(0, 0)])
        a = agent.Agent(conf.CONF, host)
        a.stop()
        a.stop()
        self.assertEqual([('restore',), ('close',)], host.calls)


class FailingHost(ScriptedHost):
    """A host whose sampling fails once, as libvirt does while it restarts."""

    def sample(self):
        if len(self.calls) == 4:
            self.calls.append(('sample',))
            raise base.HostDriverError('libvirt is restarting')
        return super().sample()


class TestPeriodRecord(AgentTestCase):

    def test_one_frozen_record_per_period(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        start = a.tick()
        self.assertTrue(start.start)
        self.assertEqual({}, dict(start.stats))
        period = a.tick()
        self.assertEqual(1, period.number)
        self.assertIs(period.decision, a.last_decision)
        self.assertEqual(period.decision.timeout_ns, period.timeout_ns)
        self.assertIs(host.applied[-1], period.decision)
        self.assertEqual(1, period.result.applied)
        self.assertFalse(period.dry_run)
        # nothing of it can change under a reader in another thread
        self.assertRaises(AttributeError, setattr, period, 'decision', None)
        with testtools.ExpectedException(TypeError):
            period.stats[model.VcpuRef('x', 0)] = None
        self.assertIn(model.VcpuRef('io-vm', 0), period.stats)

    def test_the_loop_goes_on_after_a_failed_period(self):
        # the daemon's way: a failed period is reported and skipped
        self.cfg.config(group='vsmtio_agent', period=0.01)
        host = FailingHost([snapshot(0, 0), snapshot(100, 60),
                            snapshot(200, 120)])
        a = agent.Agent(conf.CONF, host)
        seen, errors = [], []
        a.loop(2, after=seen.append, on_error=errors.append)
        self.assertEqual([0, 1, 2], [p.number for p in seen])
        self.assertEqual(1, len(errors))
        self.assertIsInstance(errors[0], base.HostDriverError)
        # without on_error (the simulator, tests) an error ends the loop
        host = FailingHost([snapshot(0, 0), snapshot(100, 60)])
        self.assertRaises(base.HostDriverError,
                          agent.Agent(conf.CONF, host).loop, 2)

    def test_status_names_each_vm_and_what_it_has(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        host.domain_names = lambda: {'io-vm': 'web-1 (instance-0001)'}
        a = agent.Agent(conf.CONF, host)
        a.tick()
        period = a.tick()
        doc = json.loads(json.dumps(status.document(
            period, host, conf.CONF.vsmtio_agent, 'scripted')))
        path = self.useFixture(fixtures.TempDir()).join('status.json')
        with open(path, 'w') as f:
            json.dump(doc, f)
        text = status.format_table(status.load(path))   # the schema holds
        self.assertIn('| web-1 (instance-0001) | 0    | io ', text)
        self.assertIn('| cpu-vm ', text)   # no name known: the domain
        self.assertIn('  web-1 (instance-0001) io-vm\n    1 io vCPU(s); ',
                      text)
        decision = period.decision
        retains = ('retains up to %d \u00b5s (the host-wide LTCR timeout)'
                   % (decision.timeout_ns // 1000)
                   if decision.retention
                   else 'no retention: the guard does not keep it')
        self.assertIn(retains, doc['vms']['io-vm']['has'])
        self.assertIsNone(doc['vms']['cpu-vm']['name'])
        # per-VM retention and weights (the decision's per-domain contract)
        per_vm = dataclasses.replace(period, decision=dataclasses.replace(
            decision, retention=True, timeouts={'io-vm': 30000},
            weights={'cpu-vm': 2.0}))
        lines = status.vm_lines(per_vm)
        self.assertIn('retains up to 30 \u00b5s (its own timeout)',
                      lines['io-vm'])
        self.assertEqual(['no retention: not kept for this VM',
                          'CPU weight x2.00'], lines['cpu-vm'][1:])

    def test_metrics_carry_nova_s_host_name(self):
        nova_conf = self.useFixture(fixtures.TempDir()).join('nova.conf')
        self.cfg.config(group='vsmtio_agent', nova_config_file=nova_conf)
        opts = conf.CONF.vsmtio_agent
        # no nova.conf: this machine's host name, nova's own default
        self.assertEqual(socket.gethostname(), metrics.host_name(opts))
        with open(nova_conf, 'w') as f:
            f.write('[DEFAULT]\ndebug = true\nhost = compute-7\n'
                    '[vsmtio]\nhost = not-this\n')
        self.assertEqual('compute-7', metrics.host_name(opts))
        self.cfg.config(group='vsmtio_agent', metrics_host='cmp7')
        self.assertEqual('cmp7', metrics.host_name(opts))
        collector = metrics.AgentCollector(metrics.host_name(opts))
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.tick()
        collector.observe(a.tick(), 'scripted')
        gauges = [s for m in collector.collect() if m.type == 'gauge'
                  for s in m.samples]
        self.assertTrue(gauges)
        self.assertEqual({'cmp7'}, {s.labels['fqdn'] for s in gauges})

    def test_an_unreadable_nova_conf_is_one_warning(self):
        nova_conf = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(nova_conf, 'w') as f:
            f.write('[DEFAULT\nhost = x\n')
        self.cfg.config(group='vsmtio_agent', nova_config_file=nova_conf)
        logger = self.useFixture(fixtures.FakeLogger(name='vsmtio_agent'))
        self.assertEqual(socket.gethostname(),
                         metrics.host_name(conf.CONF.vsmtio_agent))
        self.assertIn('Cannot read [DEFAULT] host from %s' % nova_conf,
                      logger.output)

    def test_metrics_render_one_period(self):
        from vsmtio_agent import metrics
        first, second = snapshot(0, 0), snapshot(100, 60)
        for snap, delay_ns in ((first, 0), (second, 25 * MS)):
            for ref, counters in list(snap.vcpus.items()):
                snap.vcpus[ref] = counters._replace(
                    runqueue_delay_ns=delay_ns)
        host = ScriptedHost([first, second])
        a = agent.Agent(conf.CONF, host)
        a.tick()
        period = a.tick()
        collector = metrics.AgentCollector()
        collector.observe(period, 'scripted')
        a.period = None     # the agent moves on: the scrape does not
        text = {m.name: m for m in collector.collect()}
        timeout = text['vsmtio_retention_timeout_seconds'].samples[0]
        self.assertEqual(period.decision.timeout_ns / 1e9, timeout.value)
        rates = text['vsmtio_vcpu_retention_rate'].samples
        self.assertAlmostEqual(0.6, [s.value for s in rates
                                     if s.labels['domain'] == 'io-vm'][0])
        # what server metadata no longer carries (publish.FORMER_KEYS)
        delays = {(s.labels['domain'], s.labels['vcpu']): s.value
                  for s in text['vsmtio_vcpu_runqueue_delay_ratio'].samples}
        self.assertEqual(
            {(ref.domain, str(ref.index)): st.runqueue_delay_ratio
             for ref, st in period.stats.items()
             if st.runqueue_delay_ratio is not None}, delays)
        self.assertTrue(delays)


class TestMistInTheRecord(AgentTestCase):
    """MIST's verdicts reach the record, ``status`` and the metrics."""

    def period(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.tick()
        return a.tick()

    def test_none_with_mist_off_a_mapping_with_it_on(self):
        self.cfg.config(group='vsmtio_agent', mist=False)
        self.assertIsNone(self.period().mist)
        self.cfg.config(group='vsmtio_agent', mist=True)
        # no VM here reserved I/O: nothing to judge, but MIST is on
        self.assertEqual({}, dict(self.period().mist))

    def verdicts(self):
        return {'vm-b': mist.Verdict(False, 'calm', i_cpu=0.1),
                'vm-a': mist.Verdict(True, 'I_cpu 0.80 > 0.50',
                                     i_cpu=0.8)}

    def test_status_shows_each_reserved_vm(self):
        period = dataclasses.replace(self.period(), mist=self.verdicts())
        doc = json.loads(json.dumps(status.document(
            period, ScriptedHost([]), conf.CONF.vsmtio_agent, 'scripted')))
        self.assertEqual({'vm-a', 'vm-b'}, set(doc['mist']))
        self.assertTrue(doc['mist']['vm-a']['protect'])
        text = status.format_table(doc)
        self.assertIn('MIST: 2 reserved VM(s), 1 protected', text)
        self.assertIn('vm-a: protected, I_cpu 0.80 involuntary per '
                      'voluntary switch (I_cpu 0.80 > 0.50)', text)
        self.assertIn('vm-b: not protected, I_cpu 0.10 involuntary per '
                      'voluntary switch (calm)', text)
        # MIST off: no MIST line
        doc['mist'] = None
        self.assertNotIn('MIST', status.format_table(doc))

    def test_metrics_export_protection_and_i_cpu(self):
        period = dataclasses.replace(self.period(), mist=self.verdicts())
        collector = metrics.AgentCollector()
        collector.observe(period, 'scripted')
        families = {m.name: m for m in collector.collect()}
        protected = {s.labels['domain']: s.value
                     for s in families['vsmtio_mist_protected'].samples}
        self.assertEqual({'vm-a': 1, 'vm-b': 0}, protected)
        i_cpu = {s.labels['domain']: s.value
                 for s in families['vsmtio_mist_vm_i_cpu'].samples}
        self.assertEqual({'vm-a': 0.8, 'vm-b': 0.1}, i_cpu)
        # MIST off: no MIST families at all
        self.cfg.config(group='vsmtio_agent', mist=False)
        collector.observe(self.period(), 'scripted')
        self.assertNotIn('vsmtio_mist_protected',
                         {m.name for m in collector.collect()})


class TestGuardInTheRecord(AgentTestCase):
    """Per VM, what the guard keeps and why reaches status and metrics."""

    def period(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.tick()
        return a.tick()

    def judged(self):
        kept = search.Verdict(
            'retention', True, 'gains 1.200, every VM at its floor',
            domain='io-vm', timeout_ns=50000,
            ratios=(('cpu-vm', 'computing', 0.99),
                    ('io-vm', 'serving', 1.45)))
        split = search.Verdict(
            'split', False, 'a VM loses: cpu-vm 0.900 < 0.97')
        return dataclasses.replace(
            self.period(), verdicts=(kept, split),
            retaining={'io-vm': 50000}, served={'io-vm': 1234.0})

    def test_status_says_per_vm_what_is_kept_and_why(self):
        doc = json.loads(json.dumps(status.document(
            self.judged(), ScriptedHost([]), conf.CONF.vsmtio_agent,
            'scripted')))
        self.assertIsNone(jsonschema.exceptions.best_match(
            status._VALIDATOR.iter_errors(doc)))
        text = status.format_table(doc)
        self.assertIn('retaining: io-vm at 50 \u00b5s', text)
        self.assertIn('guard: retention for io-vm at 50 \u00b5s kept (gains',
                      text)
        # one line per mechanism, with the verdict's reason
        self.assertIn('  retention: kept for io-vm (gains 1.200, every VM '
                      'at its floor)\n', text)
        self.assertIn('  split: not kept (a VM loses: cpu-vm 0.900 < 0.97)'
                      '\n', text)
        self.assertIn('  borrow: not kept (not judged yet', text)
        self.assertIn('    served 1234.0 requests and packets per second',
                      text)
        self.assertIn('guard: split dropped (a VM loses: cpu-vm', text)

    def test_metrics_per_vm(self):
        collector = metrics.AgentCollector()
        collector.observe(self.judged(), 'scripted')
        families = {m.name: m for m in collector.collect()}
        kept = {(s.labels['mechanism'], s.labels['domain']): s.value
                for s in families['vsmtio_guard_kept'].samples}
        self.assertEqual({('retention', 'io-vm'): 1, ('split', ''): 0},
                         kept)
        reasons = {s.labels['reason']
                   for s in families['vsmtio_guard_verdict'].samples}
        self.assertIn('a VM loses: cpu-vm 0.900 < 0.97', reasons)
        self.assertNotIn('vsmtio_guard_after_effect', families)
        timeout = families['vsmtio_vm_retention_timeout_seconds'].samples
        self.assertEqual([('io-vm', 50e-6)],
                         [(s.labels['domain'], s.value) for s in timeout])
        served = families['vsmtio_vm_served_rate'].samples
        self.assertEqual([1234.0], [s.value for s in served])

    def test_metrics_each_vm_against_its_floor(self):
        collector = metrics.AgentCollector(
            floors={'computing': 0.97, 'serving': 1.0})
        collector.observe(self.judged(), 'scripted')
        families = {m.name: m for m in collector.collect()}
        ratios = {(s.labels['mechanism'], s.labels['domain'],
                   s.labels['vm'], s.labels['kind']): s.value
                  for s in families['vsmtio_guard_vm_ratio'].samples}
        # the retention verdict's ratios; the split's verdict measured none
        self.assertEqual({('retention', 'io-vm', 'cpu-vm', 'computing'): 0.99,
                          ('retention', 'io-vm', 'io-vm', 'serving'): 1.45},
                         ratios)
        floors = {s.labels['kind']: s.value
                  for s in families['vsmtio_guard_floor'].samples}
        self.assertEqual({'computing': 0.97, 'serving': 1.0}, floors)
        # without floors given, none is exported (nor made up)
        collector = metrics.AgentCollector()
        collector.observe(self.judged(), 'scripted')
        self.assertNotIn('vsmtio_guard_floor',
                         {m.name for m in collector.collect()})

    def test_the_first_period_retains_nothing_under_the_guard(self):
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        a = agent.Agent(conf.CONF, host)
        a.tick()
        self.assertFalse(host.applied[0].retention)


class RefusingHost(ScriptedHost):
    """A stock host whose ``halt_poll_ns`` is read-only."""

    WHY = ('/sys/module/kvm/parameters/halt_poll_ns is read-only '
           '(mode 444)')

    def refusals(self):
        return {'retention': self.WHY}


class TestRefusedByTheHost(AgentTestCase):
    """A value the host refused is shown as refused, never as in force."""

    def period(self, host):
        a = agent.Agent(conf.CONF, host)
        a.tick()
        return a.tick()

    def doc(self, host, period):
        doc = json.loads(json.dumps(status.document(
            period, host, conf.CONF.vsmtio_agent, 'stock')))
        self.assertIsNone(jsonschema.exceptions.best_match(
            status._VALIDATOR.iter_errors(doc)))
        return doc

    def test_status_shows_the_refused_timeout_and_why(self):
        # the guard off: the decision retains at LTCR's timeout, which
        # the host did not take
        self.cfg.config(group='vsmtio_agent', guard=False)
        host = RefusingHost([snapshot(0, 0), snapshot(100, 60)])
        period = self.period(host)
        self.assertTrue(period.decision.retention)
        self.assertTrue(period.decision.timeout_ns)
        doc = self.doc(host, period)
        self.assertIsNone(doc['timeout_ns'])
        self.assertEqual({'retention': RefusingHost.WHY}, doc['refused'])
        text = status.format_table(doc)
        self.assertIn('retention timeout refused by the host', text)
        self.assertIn('  retention: refused by the host (%s)\n'
                      % RefusingHost.WHY, text)
        self.assertIn('no retention: the host refused the timeout (%s)'
                      % RefusingHost.WHY, doc['vms']['io-vm']['has'])
        # the value LTCR chose appears nowhere as in force
        self.assertNotIn('%d \u00b5s' % (period.decision.timeout_ns // 1000),
                         text)
        self.assertNotIn('retains up to', text)
        # what the guard off does apply, and what it never tries
        self.assertIn('  split: applied (guard off)\n', text)
        self.assertIn('  weight: not applied (only the guard tries VM '
                      'weights)\n', text)

    def test_a_host_taking_every_value_shows_the_timeout(self):
        self.cfg.config(group='vsmtio_agent', guard=False)
        host = ScriptedHost([snapshot(0, 0), snapshot(100, 60)])
        period = self.period(host)
        doc = self.doc(host, period)
        self.assertEqual(period.decision.timeout_ns, doc['timeout_ns'])
        self.assertEqual({}, doc['refused'])
        self.assertIn('retention timeout %d \u00b5s\n'
                      % (period.decision.timeout_ns // 1000),
                      status.format_table(doc))

    def test_nothing_kept_says_why_per_mechanism(self):
        # no instruction counter: computing VMs judged by CPU time, so the
        # split is never tried; the status says so where it says "none"
        host = RefusingHost([snapshot(0, 0), snapshot(100, 60)])
        period = self.period(host)
        params = search.Params(retention=False, weights=())
        period = dataclasses.replace(
            period, untried=search.untried(
                search.State(by_run_time=True), params))
        text = status.format_table(self.doc(host, period))
        self.assertIn('mechanisms kept: none\n', text)
        self.assertIn('  retention: refused by the host (%s)\n'
                      % RefusingHost.WHY, text)
        self.assertIn('  weight: not tried (the host sets no VM CPU '
                      'weights', text)
        self.assertIn('  split: not tried (computing VMs are judged by CPU '
                      'time here (no instruction counter)', text)
        self.assertIn('  borrow: not tried (borrowing comes with the '
                      'split)\n', text)

    def test_metrics_leave_a_refused_timeout_out_and_say_why(self):
        host = RefusingHost([snapshot(0, 0), snapshot(100, 60)])
        period = dataclasses.replace(
            self.period(host), verdicts=(), retaining={'io-vm': 50000})
        collector = metrics.AgentCollector()
        collector.observe(period, 'stock', host.refusals())
        families = {m.name: m for m in collector.collect()}
        self.assertNotIn('vsmtio_retention_timeout_seconds', families)
        self.assertEqual(
            [], families['vsmtio_vm_retention_timeout_seconds'].samples
            if 'vsmtio_vm_retention_timeout_seconds' in families else [])
        refused = [(s.labels['mechanism'], s.labels['reason'], s.value)
                   for s in families['vsmtio_host_refused'].samples]
        self.assertEqual([('retention', RefusingHost.WHY, 1)], refused)
        untried = {s.labels['mechanism']: s.labels['reason']
                   for s in families['vsmtio_mechanism_untried'].samples}
        self.assertEqual(dict(period.untried), untried)
        self.assertIn('retention', untried)    # the scripted host's knobs
        # once the host takes it (a new agent on a writable knob), it is
        # exported again, and nothing is refused
        collector.observe(period, 'stock', {})
        families = {m.name: m for m in collector.collect()}
        self.assertEqual(
            [period.decision.timeout_ns / 1e9],
            [s.value for s in
             families['vsmtio_retention_timeout_seconds'].samples])
        self.assertEqual(
            [('io-vm', 50e-6)],
            [(s.labels['domain'], s.value) for s in
             families['vsmtio_vm_retention_timeout_seconds'].samples])
        self.assertEqual([], families['vsmtio_host_refused'].samples)
