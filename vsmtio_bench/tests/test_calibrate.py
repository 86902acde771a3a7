"""``vsmtio-bench calibrate``: the kernel's tables, the profile, refusals."""

import io
import os

import fixtures
import testtools

from vsmtio_bench import calibrate
from vsmtio_bench import cmd as bench_cmd
from vsmtio_bench import documents
from vsmtio_bench import host_calibration
from vsmtio_bench import host_tables
from vsmtio_bench import kernel_host
from vsmtio_bench import kernel_math
from vsmtio_sim import cmd as sim_cmd
from vsmtio_sim import host_profile

S = kernel_math.summary


class FakeTree(fixtures.Fixture):
    """A fake sysfs (or debugfs) under a temporary directory."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path

    def put(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text + '\n')

    def states(self, cpu, rows):
        for i, (name, lat, res, off) in enumerate(rows):
            d = 'cpu%d/cpuidle/state%d/' % (cpu, i)
            self.put(d + 'name', name)
            self.put(d + 'desc', name + ' idle')
            self.put(d + 'latency', str(lat))
            self.put(d + 'residency', str(res))
            self.put(d + 'disable', '1' if off else '0')

    def no_smt(self, cpus=2):
        self.put('smt/active', '0')
        self.put('smt/control', 'notsupported')
        for c in range(cpus):
            self.put('cpu%d/topology/thread_siblings_list' % c, str(c))


class _Tree(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(FakeTree())
        self.root = self.tree.root
        self.put = self.tree.put
        self.states = self.tree.states
        self.no_smt = self.tree.no_smt


class CpuidleTableTest(_Tree):

    def test_a_driver_s_states_without_polling_or_disabled_ones(self):
        self.put('cpuidle/current_driver', 'intel_idle')
        self.put('cpuidle/current_governor', 'menu')
        self.put('cpuidle/current_governor_ro', 'teo')
        self.states(0, [('POLL', 0, 0, False), ('C1', 2, 2, False),
                        ('C1E', 10, 20, True), ('C6', 133, 600, False)])
        # ten states sort as numbers, not as text
        self.states(1, [('C%d' % i, i, i, False) for i in range(11)])
        t = host_tables.cpuidle(self.root, 0)
        self.assertEqual('intel_idle', t['driver'])
        self.assertEqual('teo', t['governor'])
        self.assertEqual(['POLL', 'C1', 'C1E', 'C6'],
                         [s['name'] for s in t['states']])
        self.assertEqual(['C1', 'C6'], [s['name'] for s in
                                        host_tables.usable_states(t)])
        self.assertEqual(133, t['states'][3]['exit_latency_us'])
        self.assertEqual(600, t['states'][3]['target_residency_us'])
        self.assertEqual(list(range(11)), [
            s['exit_latency_us'] for s in host_tables.cpuidle(
                self.root, 1)['states']])

    def test_no_driver_and_no_cpuidle(self):
        self.put('cpuidle/current_driver', 'none')
        self.put('cpuidle/current_governor', 'menu')
        t = host_tables.cpuidle(self.root, 0)
        self.assertEqual(('none', 'menu', []),
                         (t['driver'], t['governor'], t['states']))
        t = host_tables.cpuidle(os.path.join(self.root, 'nothing'), 0)
        self.assertEqual((None, None, []),
                         (t['driver'], t['governor'], t['states']))

    def test_cpu_lists(self):
        self.assertEqual([0, 1, 2, 3, 8], host_tables.cpu_list('0-3,8'))
        self.assertEqual([5], host_tables.cpu_list('5\n'))
        self.assertEqual([], host_tables.cpu_list('x-1'))
        self.assertEqual([], host_tables.cpu_list(None))

    def test_scheduler_tunables_where_debugfs_shows_them(self):
        self.put('base_slice_ns', '1400000')
        values, why = host_tables.sched_tunables(self.root)
        self.assertEqual(({'base_slice_ns': 1400000}, None), (values, why))
        values, why = host_tables.sched_tunables(
            os.path.join(self.root, 'unmounted'))
        self.assertEqual({}, values)
        self.assertIn('not readable', why)


class SmtTest(_Tree):

    def test_siblings_found_once_each(self):
        self.put('smt/active', '1')
        self.put('smt/control', 'on')
        for cpu, sib in ((0, '0,2'), (1, '1,3'), (2, '0,2'), (3, '1,3')):
            self.put('cpu%d/topology/thread_siblings_list' % cpu, sib)
        info = host_tables.smt(self.root)
        self.assertEqual((True, [[0, 2], [1, 3]]),
                         (info['active'], info['pairs']))
        self.assertIsNone(host_tables.smt_refusal(info, {0, 1, 2, 3}))
        self.assertEqual([1, 3], host_tables.sibling_pair(info, {1, 3}))
        why = host_tables.smt_refusal(info, {0, 1})
        self.assertIn('no two sibling threads among the CPUs', why)

    def test_no_smt_is_refused_politely_with_the_reason(self):
        self.no_smt()
        why = host_tables.smt_refusal(host_tables.smt(self.root), {0, 1})
        self.assertIn('no SMT', why)
        self.assertIn('smt/active 0', why)
        self.assertIn('notsupported', why)
        pair, why = calibrate.smt_plan({0, 1}, self.root)
        self.assertIsNone(pair)
        self.assertIn('no SMT', why)
        # a kernel without the smt directory says so too
        os.remove(os.path.join(self.root, 'smt', 'active'))
        why = host_tables.smt_refusal(host_tables.smt(self.root), {0, 1})
        self.assertIn('smt/active absent', why)


def host(**over):
    h = {'name': 'compute-7', 'measured_at': '2026-12-05T17:45:00Z',
         'kernel_release': '6.18.44', 'scheduler': 'EEVDF', 'hz': 250,
         'hz_source': '/proc/config.gz', 'cpus': 2, 'cpu': 1,
         'busy_before': {0: 0.5, 1: 0.0}}
    h.update(over)
    return h


def switches(one=(5000.0, 5400.0, 5200.0), two=(26000.0, 27000.0, 26500.0),
             base=(2000.0, 2200.0, 2100.0)):
    return {'round_trips': 20000, 'repetitions': {
        'round_trip_one_cpu_ns': list(one),
        'round_trip_two_cpus_ns': list(two),
        'pipe_baseline_ns': list(base)}}


WAKEUPS = {'50': S([7.0, 7.4, 7.2]), '200': S([9.0, 9.1]),
           '1000': S([14.0, 13.0])}
NO_DRIVER = {'driver': 'none', 'governor': 'menu', 'states': [],
             'source': '/sys/devices/system/cpu/cpuidle', 'cpu': 1}


class ProfileTest(testtools.TestCase):

    def build(self, **kw):
        args = dict(host=host(), table=NO_DRIVER, switches=switches(),
                    wakeups=WAKEUPS,
                    unmeasured=[{'what': 'SMT', 'why': 'no SMT here'}])
        args.update(kw)
        return host_calibration.build(**args)

    def test_a_host_without_a_cpuidle_driver(self):
        doc = self.build()
        c = doc['costs']
        # each repetition's (one - base) / 2: 1500, 1600, 1550
        self.assertEqual(1550, c['context_switch_ns'])
        self.assertAlmostEqual(0.065, doc['measured']['context_switch_ns'][
            'spread'], places=3)
        # the median over the waits (9.05 us) less the switch
        self.assertEqual({'governor': 'shallowest', 'per_core': True,
                          'states': [{'name': 'halt',
                                      'exit_latency_us': 7.5,
                                      'target_residency_us': 0}]},
                         c['host_idle'])
        # (26500 - 2100) / 2 = 12200 remote, less the 50 us timer's 7.2 us
        self.assertEqual(5000, c['ipi_ns'])
        self.assertEqual({'policy': 'eevdf', 'tick_hz': 250,
                          'latency_us': 12000, 'min_granularity_us': 1500,
                          'wakeup_granularity_us': 2000}, doc['scheduler'])
        self.assertIn('measured on compute-7 at 2026-12-05T17:45:00Z',
                      doc['sources']['costs.host_idle'])
        self.assertIn('no cpuidle driver', doc['sources']['costs.host_idle'])
        self.assertIn('EEVDF since 6.6', doc['sources']['scheduler.policy'])
        whats = [u['what'] for u in doc['not_measured']]
        self.assertEqual('SMT', whats[0])
        self.assertIn('scheduler.base_slice_us', whats)
        self.assertIn('costs.vm_exit_ns, costs.l1d_flush_ns, '
                      'costs.retention_resume_ns', whats)
        # as the simulator reads it, text keys and all
        self.assertEqual({'0': 0.5, '1': 0.0}, doc['host']['busy_before'])
        self.assertEqual(doc['costs'], host_profile.check(
            doc, 'x').inputs['costs'])

    def test_a_driver_s_own_table(self):
        table = {'driver': 'intel_idle', 'governor': 'teo',
                 'source': 'sysfs', 'cpu': 0, 'states': [
                     {'name': 'POLL', 'exit_latency_us': 0,
                      'target_residency_us': 0, 'disabled': False},
                     {'name': 'C1', 'exit_latency_us': 2,
                      'target_residency_us': 2, 'disabled': False},
                     {'name': 'C6', 'exit_latency_us': 133,
                      'target_residency_us': 600, 'disabled': False}]}
        doc = self.build(table=table)
        self.assertEqual(['C1', 'C6'], [
            s['name'] for s in doc['costs']['host_idle']['states']])
        self.assertEqual('menu', doc['costs']['host_idle']['governor'])
        src = doc['sources']['costs.host_idle']
        self.assertIn('read from the kernel: cpuidle driver intel_idle', src)
        self.assertIn('teo, which the model does not have', src)

    def test_one_cpu_leaves_the_ipi_unmeasured(self):
        doc = self.build(switches=switches(two=()))
        self.assertNotIn('ipi_ns', doc['costs'])
        self.assertIn({'what': 'costs.ipi_ns', 'why': 'one CPU only: no '
                       'wake-up from another CPU to measure'},
                      doc['not_measured'])

    def test_debugfs_tunables_and_a_cfs_kernel(self):
        doc = self.build(host=host(kernel_release='6.1.0', scheduler='CFS',
                                   hz=None),
                         tunables=({'latency_ns': 18000000,
                                    'base_slice_ns': 1400000}, None))
        s = doc['scheduler']
        self.assertEqual('cfs', s['policy'])
        self.assertNotIn('tick_hz', s)
        self.assertEqual(18000, s['latency_us'])
        # 1.4 ms over the factor 2 the kernel scaled it by on 2 CPUs
        self.assertEqual(700, s['base_slice_us'])
        self.assertIn('scheduler.tick_hz',
                      [u['what'] for u in doc['not_measured']])

    def test_smt_co_run_sets_the_polling_sibling_s_speed(self):
        corun = {'pair': [0, 2], 'computing_beside_computing': S([0.6]),
                 'computing_beside_waiting': S([0.81, 0.79, 0.8])}
        doc = self.build(corun=corun)
        self.assertEqual(0.8, doc['costs']['sibling_polling_speed'])
        self.assertIn('beside a waiting loop on its sibling 2',
                      doc['sources']['costs.sibling_polling_speed'])

    def test_a_host_without_a_name_is_still_a_host(self):
        doc = self.build(host=host(name=''))
        self.assertEqual('an unnamed host', doc['host']['name'])


class CommandTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.out = os.path.join(self.dir, 'profile.json')
        self.stderr = io.StringIO()
        self.stdout = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.stdout))

    def as_uid(self, uid):
        self.useFixture(fixtures.MonkeyPatch('os.geteuid', lambda: uid))

    def test_without_root_it_refuses_and_writes_nothing(self):
        self.as_uid(1000)
        rc = bench_cmd.main(['calibrate', '--output', self.out])
        self.assertEqual(2, rc)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('vsmtio-bench calibrate: needs root', lines[0])
        self.assertIn('nothing was measured or written', lines[0])
        self.assertEqual([], os.listdir(self.dir))

    def test_an_unwritable_output_is_refused_before_measuring(self):
        self.as_uid(0)
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_bench.kernel_host.find_controller',
            lambda: (1, '/sys/fs/cgroup/cpu')))
        rc = calibrate.main(['--output', os.path.join(self.dir, 'no', 'p')])
        self.assertEqual(2, rc)
        self.assertIn('is not a writable directory', self.stderr.getvalue())
        self.assertEqual([], os.listdir(self.dir))

    def test_no_cpu_controller_is_refused(self):
        self.as_uid(0)

        def none():
            raise kernel_host.Unavailable('no cpu controller: none here')
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_bench.kernel_host.find_controller', none))
        rc = calibrate.main(['--output', self.out])
        self.assertEqual(2, rc)
        self.assertIn('no cpu controller: none here', self.stderr.getvalue())

    def test_a_dry_run_says_what_it_would_do_and_writes_nothing(self):
        self.as_uid(0)
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_bench.kernel_host.find_controller',
            lambda: (1, '/sys/fs/cgroup/cpu')))
        rc = calibrate.main(['--dry-run', '--output', self.out])
        self.assertEqual(0, rc)
        text = self.stdout.getvalue()
        self.assertIn('would measure: the wake-up after timer waits of 50, '
                      '200, 1000 us', text)
        self.assertIn('would write: %s' % self.out, text)
        self.assertIn('SMT co-run', text)
        self.assertEqual([], os.listdir(self.dir))

    def test_the_plan_on_a_host_without_smt(self):
        tree = self.useFixture(FakeTree())
        tree.no_smt()
        tree.put('cpuidle/current_driver', 'none')
        args = calibrate.parse(['--output', '-'])
        lines = calibrate.plan(args, {0, 1}, tree.root,
                               os.path.join(tree.root, 'debug'))
        self.assertIn('idle states: no cpuidle driver (none): one state, '
                      'its exit measured', lines)
        self.assertTrue(any(line.startswith('would not measure the SMT '
                                            'co-run: no SMT')
                            for line in lines), lines)
        self.assertEqual('would write: standard output', lines[-1])


class CorunTest(testtools.TestCase):
    """The co-run's processes, on one CPU (no sibling needed), briefly."""

    def test_a_computing_loop_counts_its_iterations(self):
        cpu = max(os.sched_getaffinity(0))
        alone = kernel_host.corun(cpu, cpu, 0.05, 0.01)
        beside = kernel_host.corun(cpu, cpu, 0.05, 0.01, 'wait')
        self.assertGreater(alone, 1e5)
        # time-sliced with the waiting loop on the same CPU, not a sibling
        self.assertGreater(beside, 0)
        self.assertRaises(ValueError, kernel_host.corun, cpu, cpu, 0.05,
                          0.01, 'sleep')


class ShippedProfileTest(testtools.TestCase):
    """This project's machine's profile, committed as the example."""

    def test_the_simulator_runs_a_shipped_scenario_on_it(self):
        path = os.path.join(documents.BENCHMARKS, 'calibration.json')
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        rc = sim_cmd.main(['run', '--scenario', 'io_only', '--kernel',
                           'vanilla', '--duration', '0.5', '--profile',
                           path])
        self.assertEqual(0, rc)
        text = out.getvalue()
        self.assertIn('inputs from host profile %s' % path, text)
        # what this machine measured lands over the shipped costs
        self.assertIn('costs.context_switch_ns', text)
        self.assertIn('host scheduler: %s\n'
                      % host_profile.read(path)['scheduler']['policy'], text)
