"""The scenario format: phases, sockets, old files, bad values, inputs."""

import datetime
import io
import itertools
import os
import warnings

import fixtures
import hypothesis
from hypothesis import strategies as st
import testtools
import yaml

from vsmtio_sim import cmd as sim_cmd
from vsmtio_sim import report
from vsmtio_sim import runner
from vsmtio_sim import scenario
from vsmtio_sim.tests import helpers as h

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'fixtures')


def doc(**over):
    d = {'name': 'x', 'host': {'cores': 2},
         'vms': [{'name': 'a', 'workload': 'matmul', 'vcpus': 2}]}
    d.update(over)
    return d


def phased(**vm):
    base = {'name': 'job', 'workload': 'hadoop', 'vcpus': 2,
            'phases': [{'at_s': 1.0, 'workload': 'redis'}]}
    base.update(vm)
    return doc(vms=[base, {'name': 'b', 'workload': 'matmul', 'vcpus': 2}])


class _Errors(testtools.TestCase):

    def yaml_file(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            's.yaml')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def error(self, d):
        e = self.assertRaises(scenario.ScenarioError, scenario.from_dict, d,
                              'f.yaml')
        msg = str(e)
        self.assertNotIn('\n', msg)
        self.assertTrue(msg.startswith('f.yaml: '), msg)
        return msg


class TestBadValues(_Errors):

    def test_non_finite_numbers_anywhere_name_the_field(self):
        for d, field in (
                (doc(duration_s=float('nan')), 'duration_s'),
                (doc(warmup_s=float('nan')), 'warmup_s'),
                (doc(scheduler={'latency_us': float('inf')}),
                 'scheduler.latency_us'),
                (doc(costs={'ipi_ns': float('-inf')}), 'costs.ipi_ns'),
                # not validated by the schema, still refused
                (doc(paper={'io': {'vsmtio': float('nan')}}),
                 'paper.io.vsmtio')):
            msg = self.error(d)
            self.assertIn('%s: not a finite number' % field, msg)

    def test_non_finite_in_a_workload(self):
        wl = h.io_wl()
        wl['device'] = {'dist': 'const', 'mean_us': float('inf')}
        self.assertIn('workloads.w.device.mean_us: not a finite number',
                      self.error(doc(workloads={'w': wl})))

    def test_mixture_part_without_weight(self):
        wl = h.io_wl()
        wl['device'] = {'dist': 'mixture', 'parts': [
            {'weight': 1, 'dist': 'const', 'mean_us': 5},
            {'dist': 'const', 'mean_us': 50}]}
        msg = self.error(doc(workloads={'w': wl}))
        self.assertIn('workloads.w.device.parts.1', msg)
        self.assertIn("'weight' is a required property", msg)

    def test_alias_bomb_is_refused(self):
        # refused while loading, before anything walks the expansion
        e = self.assertRaises(scenario.ScenarioError, scenario.load,
                              os.path.join(FIXTURES, 'alias_bomb.yaml'))
        self.assertIn('aliases are expanded', str(e))
        self.assertNotIn('\n', str(e))

    def test_deep_nesting_is_one_line_not_a_recursion_error(self):
        for text in ('a: ' + '[' * 5000 + ']' * 5000 + '\n',
                     'a:\n' + ''.join('  ' * i + '-\n'
                                      for i in range(1, 3000)),
                     'a: ' + '{b: ' * 2000 + '1' + '}' * 2000 + '\n'):
            path = self.yaml_file(text)
            e = self.assertRaises(scenario.ScenarioError, scenario.load,
                                  path)
            self.assertIn('nested deeper than %d levels'
                          % scenario.MAX_DEPTH, str(e))
            self.assertNotIn('\n', str(e))
            err = io.StringIO()
            with fixtures.MonkeyPatch('sys.stderr', err):
                rc = sim_cmd.main(['run', '--scenario', path, '--kernel',
                                   'vanilla'])
            self.assertEqual(2, rc)
            self.assertEqual(1, len(err.getvalue().splitlines()),
                             err.getvalue()[-500:])
            self.assertIn('nested deeper than', err.getvalue())

    def test_recursive_alias_is_refused(self):
        path = self.yaml_file((
            'name: r\nhost: {cores: 1}\n'
            'vms: [{name: a, workload: matmul, vcpus: 1}]\n'
            'paper: &p {self: *p}\n'))
        e = self.assertRaises(scenario.ScenarioError, scenario.load, path)
        self.assertIn('aliases are expanded', str(e))

    def test_small_aliases_still_load(self):
        path = self.yaml_file((
            'name: r\nhost: {cores: 1}\n'
            'vms: [{name: a, workload: matmul, vcpus: 1}]\n'
            'paper: {a: &a [1, 2], b: *a}\n'))
        self.assertEqual([1, 2], scenario.load(path).paper['b'])

    def test_unknown_and_mistyped_overrides(self):
        self.assertIn("costs: additional properties are not allowed "
                      "('colour' is not an input)",
                      self.error(doc(costs={'colour': 1})))
        self.assertIn('vsmtio.retention_yields',
                      self.error(doc(vsmtio={'retention_yields': 2})))

    def test_nan_window_is_refused_by_the_runner(self):
        for kw in ({'duration': float('nan')},
                   {'duration': 1.0, 'warmup_s': float('inf')}):
            e = self.assertRaises(ValueError, runner.check_window, **kw)
            self.assertIn('not a finite number', str(e))

    def test_cli_refuses_nan_duration_in_one_line(self):
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        rc = sim_cmd.main(['run', '--scenario', 'fig4_hbase_matmul',
                           '--kernel', 'vanilla', '--duration', 'nan'])
        self.assertEqual(2, rc)
        # the option's own type refuses it, before the runner's check
        lines = err.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertTrue(lines[0].startswith('vsmtio-sim: error: '), lines)
        self.assertIn('duration', lines[0])
        self.assertIn('nan', lines[0])


class TestPreviousRelease(testtools.TestCase):

    def test_first_release_file_loads_with_warnings_and_runs(self):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter('always')
            sc = scenario.load(os.path.join(FIXTURES,
                                            'first_release.yaml'))
        said = [str(w.message) for w in got
                if issubclass(w.category,
                              scenario.ScenarioDeprecationWarning)]
        self.assertEqual(5, len(said), said)
        for field in ('costs.smt_corun_speedup', 'costs.reference_cpi',
                      'costs.cache_refill_ns',
                      'workloads.web.working_set_kib',
                      'workloads.crunch.working_set_kib'):
            self.assertTrue(any(field in m for m in said), field)
        # the kinds' defaults; the retired fields are gone
        self.assertEqual(256, sc.workloads['web'].working_set_kib)
        self.assertEqual(4096, sc.workloads['crunch'].working_set_kib)
        self.assertNotIn('cache_refill_ns', sc.costs)
        self.assertEqual(1500, sc.costs['vm_exit_ns'])
        sim = h.run(sc, 'vanilla', until_s=0.3)
        self.assertGreater(sum(v.requests for v in sim.vcpus), 0)

    def test_upgrade_leaves_the_callers_document_alone(self):
        d = doc(workloads={'w': {'kind': 'cpu',
                                 'cpi': {'base': 1, 'miss': 0}}},
                vms=[{'name': 'a', 'workload': 'w', 'vcpus': 1}])
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            scenario.from_dict(d)
        self.assertNotIn('working_set_kib', d['workloads']['w'])


class TestPhases(_Errors):

    def changes(self, d, n=6):
        return [(t, vm, i, wl.name) for t, vm, i, wl in itertools.islice(
            scenario.from_dict(d).phase_changes(), n)]

    def test_synchronised_phases(self):
        self.assertEqual([(1.0, 'job', 0, 'redis'), (1.0, 'job', 1, 'redis')],
                         self.changes(phased()))

    def test_per_vcpu_phases_spread_and_cycle(self):
        got = self.changes(phased(phase_sync='vcpu', phase_spread_s=0.5,
                                  phase_cycle_s=2.0))
        self.assertEqual([(1.0, 'job', 0, 'redis'),
                          (1.25, 'job', 1, 'redis'),
                          (2.0, 'job', 0, 'hadoop'),
                          (2.25, 'job', 1, 'hadoop'),
                          (3.0, 'job', 0, 'redis'),
                          (3.25, 'job', 1, 'redis')], got)

    def test_windows_are_whole_cycles_after_one_off_changes(self):
        plain = scenario.from_dict(doc())
        self.assertEqual((0.3, 16.6), plain.align(0.3, 16.6))
        once = scenario.from_dict(phased())
        self.assertEqual((1.0, 16.6), once.align(0.5, 16.6))
        cycles = scenario.from_dict(doc(vms=[
            {'name': 'a', 'workload': 'hadoop', 'vcpus': 1,
             'phases': [{'at_s': 1.0, 'workload': 'redis'}],
             'phase_cycle_s': 4.0},
            {'name': 'b', 'workload': 'matmul', 'vcpus': 1,
             'phases': [{'at_s': 1.0, 'workload': 'kmeans'}],
             'phase_cycle_s': 6.0}]))
        # the cycles' least common multiple: 12 s
        self.assertEqual((12.0, 24.0), cycles.align(0.5, 16.6))
        self.assertEqual((24.0, 12.0), cycles.align(12.5, 3.0))

    def test_phase_errors_name_the_field(self):
        msg = self.error(phased(phases=[{'at_s': 2, 'workload': 'redis'},
                                        {'at_s': 1, 'workload': 'hbase'}]))
        self.assertIn('vms.0.phases.1.at_s', msg)
        msg = self.error(phased(phases=[{'at_s': 1, 'workload': 'nope'}]))
        self.assertIn("vms.0.phases.0.workload: unknown workload 'nope'",
                      msg)
        self.assertIn('vms.0.phase_cycle_s',
                      self.error(phased(phase_cycle_s=0.5)))
        self.assertIn('phase_spread_s',
                      self.error(phased(phase_sync='vcpu')))
        self.assertIn('vms.0', self.error(doc(vms=[{
            'name': 'a', 'workload': 'matmul', 'vcpus': 1,
            'phase_cycle_s': 1.0}])))

    def test_a_batch_job_becomes_a_server_and_back(self):
        d = dict(name='t', host={'cores': 2}, placement='explicit',
                 workloads={'cpu': h.CPU_WL, 'srv': h.io_wl(50, 200)},
                 vms=[{'name': 'job', 'workload': 'cpu', 'vcpus': 2,
                       'threads': [0, 1],
                       'phases': [{'at_s': 1.0, 'workload': 'srv'},
                                  {'at_s': 2.0, 'workload': 'cpu'}]},
                      {'name': 'b', 'workload': 'cpu', 'vcpus': 2,
                       'threads': [2, 3]}])
        sc = scenario.from_dict(d)
        self.assertEqual('mixed', sc.vm_kind('job'))
        self.assertEqual('cpu', sc.vm_kind('b'))
        for kernel in ('vanilla', 'haltpoll', 'vsmtio-paper'):
            sim = h.run(sc, kernel, until_s=0.9)
            job = [h.vcpu(sim, 'job', i) for i in (0, 1)]
            self.assertEqual(0, sum(v.requests for v in job))
            sim.advance_to(1.9e9)
            served = sum(v.requests for v in job)
            self.assertGreater(served, 1000, kernel)
            self.assertEqual('srv', job[0].wl.name)
            sim.advance_to(2.1e9)
            settled = sum(v.requests for v in job)
            instr = sum(v.instructions for v in job)
            start = sim.totals()
            sim.advance_to(3.0e9)
            # a batch job again: it serves nothing more, computes on
            self.assertEqual(settled, sum(v.requests for v in job))
            self.assertGreater(sum(v.instructions for v in job),
                               instr + 1e9)
            r = report.measure(sim, start, sim.totals(), 1.0)
            self.assertEqual('mixed', r['vms']['job']['kind'])

    def test_same_requests_under_every_kernel(self):
        # each phase draws from streams of its own, reseeded with the rest:
        # common random numbers still hold across kernels
        sc = scenario.from_dict(phased(
            phases=[{'at_s': 0.1, 'workload': 'redis'}]))
        draws = []
        for kernel in ('vanilla', 'polling'):
            sim = h.run(sc, kernel, until_s=0.2)
            self.assertIn('job/0/device/redis', sim.streams)
            sim.reseed('window 1')
            v = h.vcpu(sim, 'job', 0)
            draws.append([v.draw_device() for _ in range(3)])
        self.assertEqual(draws[0], draws[1])


class TestSockets(_Errors):

    def test_llc_share_follows_from_the_socket(self):
        sc = scenario.from_dict(doc(host={'cores': 4, 'sockets': 2,
                                          'llc_kib': 8192}))
        self.assertEqual(2048, sc.host['llc_share_kib'])
        # a switch still evicts the core's L2 only
        self.assertEqual(256, sc.costs['cache_share_kib'])
        self.assertEqual([0, 0, 1, 1, 0, 0, 1, 1],
                         [sc.socket_of(c) for c in range(8)])
        plain = scenario.from_dict(doc())
        self.assertEqual(1, plain.sockets)
        self.assertEqual(1280, plain.host['llc_share_kib'])

    def test_cores_must_split_over_sockets(self):
        self.assertIn('host.sockets',
                      self.error(doc(host={'cores': 3, 'sockets': 2})))

    def test_a_move_across_sockets_refills_the_working_set(self):
        wl = dict(h.CPU_WL, working_set_kib=1024)
        sc = h.tiny([('a', 'big', [0])], cores=2,
                    workloads={'big': wl}, host={'cores': 2, 'sockets': 2})
        sim = h.run(sc, 'vanilla', until_s=0.01)
        v = h.vcpu(sim, 'a')
        self.assertEqual(1, sim.threads[1].socket)
        v.cold = 0.0
        sim._migrate(v, sim.threads[0], sim.threads[2])   # same socket
        self.assertEqual(0.0, v.cold)
        sim._migrate(v, sim.threads[0], sim.threads[1])
        want = 1024 * 1024 / sc.costs['cache_refill_gbps'] * 1.45
        self.assertAlmostEqual(want, v.cold)


class TestSetInput(testtools.TestCase):

    def test_paths_values_and_functions(self):
        d = scenario.load_doc('fig5_hbase_pagerank')[0]
        out = scenario.set_input(d, 'scheduler.vm_cgroup_shares', 0)
        self.assertEqual(0, scenario.from_dict(out).scheduler[
            'vm_cgroup_shares'])
        out = scenario.set_input(d, 'costs.smt_pair_speedup.max', 1.5)
        self.assertEqual({'min': 1.0, 'max': 1.5},
                         scenario.from_dict(out).costs['smt_pair_speedup'])
        out = scenario.set_input(d, 'workloads.*.working_set_kib',
                                 lambda kib: kib / 4)
        sc = scenario.from_dict(out)
        self.assertEqual(64, sc.workloads['hbase'].working_set_kib)
        self.assertEqual(1024, sc.workloads['pagerank'].working_set_kib)
        # the caller's document is unchanged
        self.assertNotIn('workloads', d)
        self.assertRaises(KeyError, scenario.set_input, d, 'costs.nope', 1)


class TestSharedReferences(testtools.TestCase):

    def test_a_document_of_shared_lists_is_walked_once(self):
        # what an alias bomb becomes once loaded by a loader without the
        # bound: from_dict still checks it in linear time
        layer = ['lol'] * 9
        for _ in range(12):
            layer = [layer] * 9
        sc = scenario.from_dict(doc(paper={'bomb': layer}))
        self.assertEqual('x', sc.name)


# YAML's own syntax, in pieces: what a hand or a broken generator leaves.
_TOKENS = ['[', ']', '{', '}', '- ', ': ', ':', ', ', '&a ', '*a', '&b ',
           '*b', '\n', '\n  ', '  ', 'x', 'name', 'host', 'cores', 'vms',
           '1', '-1', '1e999', 'nan', '.nan', '.inf', '0x10', 'null',
           '!!binary aGk=', '!!set {a, b}', '!!python/object:os.system ',
           '!!timestamp 2001-12-14', '? ', '"', "'", '# c', '---\n',
           '...\n', '%YAML 1.1\n', '<<: *a', '|\n', '>\n', '\t', '\x00',
           '\ufeff', 'é']
_LEAVES = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=8) | st.binary(max_size=4)
           | st.dates().map(lambda d: datetime.datetime(d.year, d.month,
                                                        d.day)))
_TREES = st.recursive(
    _LEAVES,
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.text(max_size=6) | st.integers(),
                                     inner, max_size=3)),
    max_leaves=10)
_FIELDS = ['name', 'host', 'vms', 'duration_s', 'warmup_s', 'costs',
           'workloads', 'scheduler', 'placement', 'paper', 'seed']


@st.composite
def scenario_texts(draw):
    """A scenario file's text: tokens, a mutated scenario, deep nesting."""
    kind = draw(st.sampled_from(['tokens', 'mutated', 'deep', 'bytes']))
    if kind == 'tokens':
        return ''.join(draw(st.lists(st.sampled_from(_TOKENS),
                                     max_size=40)))
    if kind == 'bytes':
        return draw(st.binary(max_size=200)).decode('latin-1')
    if kind == 'deep':
        depth = draw(st.integers(1, 3000))
        opener, closer = draw(st.sampled_from([('[', ']'), ('{a: ', '}')]))
        return 'name: ' + opener * depth + '1' + closer * depth + '\n'
    d = doc()
    for field in draw(st.lists(st.sampled_from(_FIELDS), min_size=1,
                               max_size=3)):
        d[field] = draw(_TREES)
    return yaml.safe_dump(d, allow_unicode=True)


class TestScenarioFiles(_Errors):
    """Any file given as a scenario loads or is one line; never a trace."""

    # No deadline per example (a loaded machine makes one flaky): a hang
    # outlasts the test's Timeout, which ends it.
    @hypothesis.settings(max_examples=300, database=None, deadline=None,
                         suppress_health_check=[
                             hypothesis.HealthCheck.too_slow])
    @hypothesis.given(text=scenario_texts())
    def test_a_scenario_file_loads_or_is_one_line(self, text):
        path = os.path.join(self.tmp, 's.yaml')
        with open(path, 'w', encoding='utf-8', errors='surrogatepass') as f:
            f.write(text)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore',
                                  scenario.ScenarioDeprecationWarning)
            try:
                scenario.load(path)
            except scenario.ScenarioError as exc:
                self.assertNotIn('\n', str(exc))
                self.assertIn('s.yaml', str(exc))

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_pyyaml_s_own_constructor_errors_are_one_line(self):
        for text in ('!!timestamp 2001-12-14vms\n',
                     'name: !!timestamp 2001-02-30\n',
                     'name: !!float x\n', 'name: !!int 0x\n'):
            path = os.path.join(self.tmp, 's.yaml')
            with open(path, 'w') as f:
                f.write(text)
            e = self.assertRaises(scenario.ScenarioError, scenario.load,
                                  path)
            self.assertIn('not valid YAML', str(e))
            self.assertNotIn('\n', str(e))
