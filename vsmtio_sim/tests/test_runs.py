"""Whole runs: determinism, the real agent on the simulated host, the CLI,
and the paper's directions on a reduced host (§6)."""

import ast
import json
import os
import tempfile
import threading
import time
import unittest

import fixtures
import testtools
import yaml

from vsmtio_agent.drivers import base
from vsmtio_sim import cmd as sim_cmd
from vsmtio_sim import driver as sim_driver
from vsmtio_sim import runner
from vsmtio_sim import scenario


def reduced(name, cores=4, duration=1.0, warmup=0.4):
    """A shipped paper scenario scaled to ``cores`` (vCPUs scaled too)."""
    with open(os.path.join(scenario.SCENARIO_DIR, name + '.yaml')) as f:
        d = yaml.safe_load(f)
    scale = cores / d['host']['cores']
    d['host']['cores'] = cores
    d['duration_s'], d['warmup_s'] = duration, warmup
    for vm in d['vms']:
        vm['vcpus'] = max(1, int(round(vm['vcpus'] * scale)))
    return d


class _ScenarioFile(fixtures.Fixture):

    def __init__(self, doc):
        self.doc = doc

    def _setUp(self):
        fd, self.path = tempfile.mkstemp(suffix='.yaml')
        with os.fdopen(fd, 'w') as f:
            yaml.safe_dump(self.doc, f)
        self.addCleanup(os.unlink, self.path)


def strip(result):
    result = dict(result)
    result.pop('sim')
    return result


class TestDeterminism(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=2, duration=0.4,
                    warmup=0.1))).path

    def test_same_seed_same_result(self):
        for kernel in ('vanilla', 'vsmtio'):
            a = runner.run(self.path, kernel, seed=7)
            b = runner.run(self.path, kernel, seed=7)
            self.assertEqual(strip(a), strip(b))

    def test_other_seed_other_result(self):
        a = runner.run(self.path, 'vanilla', seed=1)
        b = runner.run(self.path, 'vanilla', seed=2)
        self.assertNotEqual(a['io_throughput'], b['io_throughput'])


class TestAgentOnSimulatedHost(testtools.TestCase):
    """The real Agent loop drives the simulated host (no fakes)."""

    def test_agent_ticks_apply_rass_and_ltcr(self):
        from vsmtio_agent import agent as agent_mod
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=2, duration=0.5))).path
        # the paper's configuration applies RASS from the first period
        conf = runner.make_conf(path, 'vsmtio-paper')
        driver = sim_driver.SimulatedHostDriver(conf)
        self.assertEqual('simulated', driver.describe().mode)
        ag = agent_mod.Agent(conf, driver)
        ag.tick()
        for _ in range(5):
            decision = ag.tick().decision
        sim = driver.simulation
        self.assertEqual(decision.timeout_ns, int(sim.timeout_ns))
        self.assertTrue(sim.rass_active)
        io_vcpus = [v for v in sim.vcpus if v.wl.kind == 'io']
        # RASS put the retaining (Redis) vCPUs on the I/O siblings
        self.assertTrue(all(v.home.is_io for v in io_vcpus))
        self.assertTrue(all(str(v.role) == str(decision.placements[
            v.ref].role) for v in sim.vcpus))
        ag.stop()

    def test_found_through_the_host_driver_namespace(self):
        from stevedore import driver as sd
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1))).path
        mgr = sd.DriverManager('vsmtio_agent.host_drivers', 'simulated',
                               invoke_on_load=True,
                               invoke_args=(runner.make_conf(path,
                                                             'vsmtio'),))
        self.assertIsInstance(mgr.driver, sim_driver.SimulatedHostDriver)

    def test_restore_puts_the_initial_timeout_back(self):
        from vsmtio_agent import model
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1))).path
        driver = sim_driver.SimulatedHostDriver(
            runner.make_conf(path, 'vsmtio'))
        before = driver.simulation.timeout_ns
        result = driver.apply(model.Decision(timeout_ns=12345,
                                             placements={}))
        self.assertEqual(1, result.applied)
        self.assertEqual(12345, driver.simulation.timeout_ns)
        driver.restore()
        self.assertEqual(before, driver.simulation.timeout_ns)

    def test_unknown_vcpu_in_a_decision_fails_alone(self):
        from vsmtio_agent import model
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1))).path
        driver = sim_driver.SimulatedHostDriver(
            runner.make_conf(path, 'vsmtio'))
        core = driver.topology().cores[0]
        ghost = model.VcpuRef('ghost', 0)
        result = driver.apply(model.Decision(
            timeout_ns=100000, placements={ghost: model.Placement(
                core.core_id, model.Role.IO, core.io_thread,
                (core.io_thread,))}))
        self.assertEqual(1, result.failed)
        self.assertIn('ghost/0', result.messages[0])

    def test_other_kernels_offer_no_knobs(self):
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1))).path
        driver = sim_driver.SimulatedHostDriver(
            runner.make_conf(path, 'vanilla'))
        from vsmtio_agent import model
        result = driver.apply(model.Decision(timeout_ns=1, placements={}))
        self.assertIsInstance(result, base.ApplyResult)
        self.assertEqual(0, result.applied)


class TestRealTime(testtools.TestCase):
    """``[vsmtio_sim] real_time``: a daemon's host keeps the clock's pace."""

    def driver(self):
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1))).path
        return sim_driver.SimulatedHostDriver(runner.make_conf(
            path, 'vsmtio', overrides={('vsmtio_sim', 'real_time'): True}))

    def test_simulated_time_does_not_outrun_the_clock(self):
        driver = self.driver()
        start = time.monotonic()
        for _ in range(3):
            driver.advance(0.1)
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertAlmostEqual(0.3e9, driver.simulation.now, delta=1e6)

    def test_interrupt_ends_the_wait(self):
        driver = self.driver()
        sim = driver.simulation
        # the wait, not the simulation, is under test: its five simulated
        # seconds pass at once (however loaded the machine), and the five
        # of the clock that would follow are cut short
        sim.advance_to = lambda t: setattr(sim, 'now', t)
        threading.Timer(0.1, driver.interrupt).start()
        start = time.monotonic()
        driver.advance(5.0)
        self.assertEqual(5e9, sim.now)
        self.assertLess(time.monotonic() - start, 4.5)


class TestCli(testtools.TestCase):

    def main(self, *argv):
        out = self.useFixture(fixtures.StringStream('stdout')).stream
        err = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        rc = sim_cmd.main(list(argv))
        out.seek(0)
        err.seek(0)
        return rc, out.read(), err.read()

    def assertOneLineError(self, needle, *argv):
        rc, out, err = self.main(*argv)
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        lines = err.strip().splitlines()
        self.assertEqual(1, len(lines), err)
        self.assertIn(needle, lines[0])
        self.assertNotIn('Traceback', err)

    def test_unknown_scenario(self):
        self.assertOneLineError("unknown scenario 'nope'", 'run',
                                '--scenario', 'nope', '--kernel', 'vanilla')

    def test_unknown_kernel(self):
        self.assertOneLineError("unknown kernel 'linux'", 'run',
                                '--scenario', 'redis_pagerank', '--kernel',
                                'linux')

    def test_bad_duration(self):
        self.assertOneLineError('--duration', 'compare', '--scenario',
                                'redis_pagerank', '--duration', '-1')

    def test_bad_scenario_file(self):
        d = reduced('redis_pagerank', cores=1)
        d['vms'][0]['vcpus'] = 'many'
        path = self.useFixture(_ScenarioFile(d)).path
        self.assertOneLineError('vms.0.vcpus', 'run', '--scenario', path,
                                '--kernel', 'vanilla')

    def test_list(self):
        rc, out, _ = self.main('list')
        self.assertEqual(0, rc)
        self.assertIn('redis_pagerank', out)
        self.assertIn('haltpoll-enhanced', out)

    def test_run_json(self):
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1, duration=0.3,
                    warmup=0.1))).path
        rc, out, err = self.main('run', '--scenario', path, '--kernel',
                                 'haltpoll', '--json')
        self.assertEqual(0, rc)
        result = json.loads(out)
        self.assertEqual('haltpoll', result['kernel'])
        self.assertGreater(result['io_throughput'], 0)
        self.assertIn('100%', err)         # progress went to stderr

    def test_compare_table(self):
        path = self.useFixture(_ScenarioFile(
            reduced('redis_pagerank', cores=1, duration=0.3,
                    warmup=0.1))).path
        rc, out, _ = self.main('compare', '--scenario', path,
                               '--processes', '1')
        self.assertEqual(0, rc)
        for kernel in ('vanilla', 'polling', 'haltpoll',
                       'haltpoll-enhanced', 'vsmtio'):
            self.assertIn(kernel, out)
        self.assertIn('1.000', out)
        self.assertIn('vsmtio: the real agent ran', out)


class TestSteadyWindow(testtools.TestCase):
    """The window the benches' cached runs are measured over."""

    def test_673_periods_at_the_defaults(self):
        conf = runner.make_conf('sockperf_matmul', 'vsmtio')
        self.assertEqual(67.3, runner.steady_window(conf))
        self.assertEqual(673, round(runner.steady_window(conf)
                                    / conf.vsmtio_agent.period))

    def test_no_policy_code_sets_it(self):
        with open(runner.__file__) as f:
            tree = ast.parse(f.read())
        imported = [n.module for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom)]
        self.assertFalse([m for m in imported
                          if m.startswith('vsmtio_agent.policy')])


class TestShiftedWindow(testtools.TestCase):
    """The A/A run's window starts after another history, phases or not."""

    def starts(self, name, *shifts):
        sc = runner.load(name)
        return [sc.align(runner.shifted_warmup(sc, s) if s else
                         sc.warmup_s, 0.0)[0] for s in (0.0,) + shifts]

    def test_a_shift_shorter_than_a_cycle_moves_a_cycle(self):
        # phases_batch_server cycles every 10 s: vanilla's window starts
        # at 10 s; the A/A run's (7.3 s later) and vanilla-again's
        # (14.6 s later) each start on a later cycle, so the three runs
        # differ (the A/A shift added to the warm-up was rounded back to
        # 10 s, and the A/A run was vanilla itself)
        base, aa, again = self.starts('phases_batch_server',
                                      runner.AA_SHIFT_S,
                                      2 * runner.AA_SHIFT_S)
        self.assertEqual((10.0, 20.0, 30.0), (base, aa, again))

    def test_without_phases_the_shift_is_the_shift(self):
        sc = runner.load('fig5_hbase_pagerank')
        self.assertEqual(sc.warmup_s + runner.AA_SHIFT_S,
                         runner.shifted_warmup(sc, runner.AA_SHIFT_S))

    def test_the_aa_run_is_shifted_so(self):
        run = self.useFixture(fixtures.MockPatchObject(runner, 'run')).mock
        runner.run_aa('phases_batch_server', seed=2)
        self.assertEqual(10.0 + runner.AA_SHIFT_S,
                         run.call_args.kwargs['warmup_s'])
        self.assertEqual(('phases_batch_server', 'vanilla'),
                         run.call_args.args)


class TestSteadyState(testtools.TestCase):
    """At the paper's size, after the agent settled (§6).

    (HBase, PageRank) is a Fig. 5 pair whose I/O loop is derived from the
    paper's vanilla profile. ``vsmtio-paper`` is the paper taken literally,
    ``vsmtio`` the product (throughput-judged LTCR, the guard, fairness).
    Where the model does not reproduce one of the paper's directions the
    test is an expected failure and doc/source/benchmarks/simulator.rst
    says why: the model is not tuned to the paper. The host runs the
    paper's scheduler, Linux 5.3's CFS, whatever the model ships.
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.results = {}
        cfs = {('vsmtio_sim', 'scheduler'): 'cfs'}
        for name, kernels in (
                ('fig5_hbase_pagerank', ('vanilla', 'vsmtio-paper',
                                         'vsmtio')),
                ('fig8_all_cpu_0_96', ('vanilla', 'vsmtio')),
                ('adversarial_gamer', ('vanilla', 'vsmtio'))):
            cls.results[name] = {k: runner.run(name, k, steady=True,
                                               overrides=cfs)
                                 for k in kernels}
        # what the model's noise alone makes of each VM's mean
        cls.results['fig5_hbase_pagerank']['aa'] = runner.run_aa(
            'fig5_hbase_pagerank', overrides=cfs)

    def ratio(self, name, key, kernel='vsmtio'):
        r = self.results[name]
        return r[kernel][key] / r['vanilla'][key]

    def test_the_agent_settled(self):
        for kernel in ('vsmtio-paper', 'vsmtio'):
            agent = self.results['fig5_hbase_pagerank'][kernel]['agent']
            self.assertIsNotNone(agent['settled_at_s'], kernel)
            self.assertTrue(agent['trajectory'])

    def test_paper_ltcr_grows_the_timeout_to_milliseconds(self):
        # Algorithm 1 with IPC accepts step after step (§4.2; Table 6)
        agent = self.results['fig5_hbase_pagerank']['vsmtio-paper']['agent']
        self.assertGreater(agent['timeout_us'], 1000)

    def test_paper_raises_io_throughput(self):
        self.assertGreater(self.ratio('fig5_hbase_pagerank', 'io_throughput',
                                      'vsmtio-paper'), 1.05)

    def test_paper_cuts_vcpu_switches(self):
        # retentions of milliseconds outlast most waits (Table 5)
        self.assertLess(self.ratio('fig5_hbase_pagerank',
                                   'vcpu_switches_per_s', 'vsmtio-paper'),
                        0.6)

    def test_vsmtio_does_not_spin(self):
        # a waiting vCPU is retained (MWAIT), never spun; the product
        # retains where its guard keeps a retention (and in the A arms
        # of its retention probes)
        for kernel in ('vsmtio-paper', 'vsmtio'):
            r = self.results['fig5_hbase_pagerank'][kernel]
            self.assertEqual(0.0, r['spinning_pct'])
            if (kernel == 'vsmtio-paper'
                    or 'retention' in r['agent']['mechanisms']):
                self.assertGreater(r['retention_pct'], 0.0, kernel)

    @unittest.expectedFailure
    def test_paper_raises_cpu_throughput(self):
        # Lower (about 0.9): the retention and the I/O vCPUs' sibling take
        # hyperthread time the CPU-bound vCPUs used; the switches saved are
        # worth less at the shipped costs (the break-even map in
        # doc/source/benchmarks/simulator.rst shows what costs would turn it)
        self.assertGreater(self.ratio('fig5_hbase_pagerank',
                                      'cpu_throughput', 'vsmtio-paper'),
                           1.0)

    def test_product_keeps_every_tenant_at_its_floor(self):
        # per VM, not per class: each honest VM at its floor as a mean
        # over the steady window, on the paper's pair (on the
        # gamer's small host the probes' cost leaves the honest KV store
        # about 3% under its 1.0 floor: doc/source/benchmarks/guard.rst; the
        # test below holds every honest VM there to 0.95)
        # each floor net of the model's noise (the A/A run): no test
        # tells a smaller difference from it
        from vsmtio_sim import tenants
        r = self.results['fig5_hbase_pagerank']
        for vm, v in tenants.judge(r['vsmtio'], r['vanilla'],
                                   aa=r['aa']).items():
            if not v['adversary']:
                self.assertGreaterEqual(v['ratio'], v['floor'], vm)

    def test_product_reports_its_verdicts(self):
        agent = self.results['fig5_hbase_pagerank']['vsmtio']['agent']
        judged = {v['mechanism'] for v in agent['verdicts']}
        self.assertIn('retention', judged)
        for v in agent['verdicts']:
            self.assertTrue(v['reason'])

    def test_all_cpu_control_within_two_percent(self):
        # Holds because the simulated host starts its vCPUs out of phase:
        # in lockstep, vanilla's siblings paired like with like would all
        # run long and RASS's symbiotic pairing (§4.3.2) would look 4%
        # better
        self.assertAlmostEqual(
            1.0, self.ratio('fig8_all_cpu_0_96', 'cpu_throughput'),
            delta=0.02)

    def test_no_tenant_gains_by_shaping_its_waits(self):
        # the honest batch and I/O VMs each keep >= 0.95 of what vanilla
        # gives them, and the gamer gains nothing to speak of
        r = self.results['adversarial_gamer']
        for name in ('pagerank', 'kmeans', 'hbase', 'gamer'):
            w = r['vsmtio']['workloads'][name]
            b = r['vanilla']['workloads'][name]
            key = ('requests_per_s' if w['kind'] == 'io'
                   else 'instructions_per_s')
            ratio = w[key] / b[key]
            if name == 'gamer':
                self.assertLess(ratio, 1.05, name)
            else:
                self.assertGreaterEqual(ratio, 0.95, name)
