"""``vsmtio-bench sim --scheduler``: the host scheduler of every run.

The bench's runs take hours; here the simulator's runs are mocks and the
worker pools run in this process, so what each run was asked for can be
read: the scheduler reaches every run as ``vsmtio-sim --scheduler``
passes it (the ``[vsmtio_sim] scheduler`` override), an unknown one is
refused before anything runs, and the JSON and the document keep it.
"""

import concurrent.futures
import io
import json
import os

import fixtures
import testtools

from vsmtio_bench import document
from vsmtio_bench import documents
from vsmtio_bench import figures
from vsmtio_bench import oracle
from vsmtio_bench import sensitivity
from vsmtio_bench import sim
from vsmtio_sim import kernels
from vsmtio_sim import runner

CFS = {('vsmtio_sim', 'scheduler'): 'cfs'}
SCENARIO = 'fig4_hbase_matmul'


class InProcess(object):
    """A ProcessPoolExecutor that runs its jobs here, one by one."""

    def __init__(self, processes=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, jobs):
        return map(fn, jobs)

    def submit(self, fn, *args):
        done = concurrent.futures.Future()
        try:
            done.set_result(fn(*args))
        except Exception as e:
            done.set_exception(e)
        return done


def in_process(test):
    """Every pool of the bench runs in ``test``'s process, quietly.

    With a cache of its own, empty.
    """
    test.useFixture(fixtures.MonkeyPatch(
        'concurrent.futures.ProcessPoolExecutor', InProcess))
    test.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
    test.useFixture(fixtures.EnvironmentVariable(
        'VSMTIO_BENCH_CACHE', test.useFixture(fixtures.TempDir()).path))


def result(**extra):
    """A run's result, as much of it as the bench reads around a run."""
    return dict({'io_throughput': 1.0, 'cpu_throughput': 1.0,
                 'measured_s': 1.0, 'vms': {}, 'windows': {}}, **extra)


class TestRuns(testtools.TestCase):
    """The option reaches every run of the bench."""

    def setUp(self):
        super().setUp()
        in_process(self)
        self.run = self.useFixture(fixtures.MockPatchObject(
            runner, 'run', side_effect=lambda *a, **kw: result())).mock
        self.run_aa = self.useFixture(fixtures.MockPatchObject(
            runner, 'run_aa', side_effect=lambda *a, **kw: result())).mock

    def test_every_kernel_and_the_aa_run_under_the_scheduler(self):
        results = sim.run_all([SCENARIO], 1, 'cfs')
        self.assertEqual(set(kernels.NAMES), set(results[SCENARIO]))
        self.assertEqual(sorted(kernels.NAMES), sorted(
            c.args[1] for c in self.run.call_args_list))
        self.assertEqual([CFS] * len(kernels.NAMES),
                         [c.kwargs['overrides']
                          for c in self.run.call_args_list])
        self.assertEqual([((SCENARIO,), {'overrides': CFS})],
                         [(c.args, c.kwargs)
                          for c in self.run_aa.call_args_list])

    def test_a_run_made_by_the_same_code_is_not_run_again(self):
        first = sim.run_all([SCENARIO], 1, 'cfs')
        n = len(kernels.NAMES) + 1
        self.assertEqual(n, self.run.call_count + self.run_aa.call_count)
        self.assertEqual('', document.cached_text(first))
        again = sim.run_all([SCENARIO], 1, 'cfs')
        self.assertEqual(n, self.run.call_count + self.run_aa.call_count)
        self.assertEqual(first[SCENARIO]['vsmtio']['io_throughput'],
                         again[SCENARIO]['vsmtio']['io_throughput'])
        self.assertIn('%d of those %d runs were in the bench\'s cache' % (
            n, n), document.cached_text(again))
        # another scheduler is another run; the scenario's own scheduler
        # asked for by name is the same run as none asked for
        sim.run_all([SCENARIO], 1, 'eevdf')
        self.assertEqual(2 * n, self.run.call_count + self.run_aa.call_count)
        sim.run_all([SCENARIO], 1)
        self.assertEqual(2 * n, self.run.call_count + self.run_aa.call_count)

    def test_no_scheduler_is_no_override(self):
        sim.run_all([SCENARIO], 1)
        self.assertEqual({None}, {c.kwargs['overrides'] for c in
                                  self.run.call_args_list
                                  + self.run_aa.call_args_list})

    def test_the_breakeven_map_under_the_scheduler(self):
        grid, _cpu = figures.breakeven(500.0, 1, 'cfs')
        self.assertEqual(len(figures.REFILL_US) * len(figures.PAIR_MAX),
                         len(grid))
        calls = self.run.call_args_list
        self.assertEqual(2 * len(grid), len(calls))
        for c in calls:
            ov = c.kwargs['overrides']
            self.assertEqual('cfs', ov[oracle.SCHEDULER])
            # the paper-literal kernel's timeout is still held
            self.assertEqual(
                c.args[1] == 'vsmtio-paper',
                ov.get(('vsmtio_agent', 'initial_timeout_us')) == 500)

    def test_the_breakeven_map_without_a_scheduler_as_before(self):
        figures.breakeven(500.0, 1)
        for c in self.run.call_args_list:
            ov = c.kwargs['overrides']
            if c.args[1] == 'vanilla':
                self.assertIsNone(ov)
            else:
                self.assertNotIn(oracle.SCHEDULER, ov)
                self.assertEqual(500, ov[('vsmtio_agent',
                                          'max_timeout_us')])


class TestCommand(testtools.TestCase):
    """``main``: the option parsed, passed on, written and read back."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.err = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        self.mocks = {}
        settled = {figures.TRAJECTORY: {k: {'bench_cpu_s': 1.0, 'agent': {
            'timeout_us': 500.0}} for k in kernels.NAMES}}
        for module, name, value in (
                (sim, 'run_all', settled),
                (figures, 'breakeven', ({}, 0.0)),
                (sensitivity, 'run_sensitivity', ({}, 0.0)),
                (sensitivity, 'run_cliff', (None, 0.0)),
                (figures, 'pictures', None),
                (document, 'document', 'the document\n'),
                (runner, 'run', None), (runner, 'run_aa', None)):
            self.mocks[name] = self.useFixture(fixtures.MockPatchObject(
                module, name, return_value=value)).mock

    def argv(self, *extra):
        return (['--only', figures.TRAJECTORY, '--processes', '1',
                 '--out', os.path.join(self.tmp, 'out.rst'),
                 '--json', os.path.join(self.tmp, 'out.json')]
                + list(extra))

    def test_an_unknown_scheduler_is_refused_before_anything_runs(self):
        e = self.assertRaises(SystemExit, sim.main,
                              self.argv('--scheduler', 'bfs'))
        self.assertEqual(2, e.code)
        self.assertIn('--scheduler', self.err.getvalue())
        self.assertIn("'bfs'", self.err.getvalue())
        for name, mock in self.mocks.items():
            self.assertFalse(mock.called, name)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'out.json')))

    def test_the_choices_are_the_simulators(self):
        action = next(a for a in sim._parser()._actions
                      if a.dest == 'scheduler')
        self.assertEqual(['cfs', 'eevdf'], action.choices)
        self.assertIsNone(action.default)

    def test_the_scheduler_reaches_every_study_and_the_json(self):
        self.assertEqual(0, sim.main(self.argv('--scheduler', 'cfs')))
        self.assertEqual(([figures.TRAJECTORY], 1, 'cfs'),
                         self.mocks['run_all'].call_args.args)
        self.assertEqual((500.0, 1, 'cfs'),
                         self.mocks['breakeven'].call_args.args)
        self.assertEqual('cfs',
                         self.mocks['run_sensitivity'].call_args.args[5])
        # the cliff sweep runs both schedulers whatever the option says
        self.assertNotIn('cfs', self.mocks['run_cliff'].call_args.args)
        with open(os.path.join(self.tmp, 'out.json')) as f:
            doc = json.load(f)
        self.assertEqual('cfs', doc['scheduler'])
        self.assertEqual({figures.TRAJECTORY: 'cfs'}, doc['policies'])
        self.assertEqual(('cfs', {figures.TRAJECTORY: 'cfs'}),
                         self.mocks['document'].call_args.args[-2:])

    def test_no_scheduler_records_the_scenarios_own(self):
        self.assertEqual(0, sim.main(self.argv()))
        self.assertIsNone(self.mocks['run_all'].call_args.args[2])
        with open(os.path.join(self.tmp, 'out.json')) as f:
            doc = json.load(f)
        self.assertIsNone(doc['scheduler'])
        self.assertEqual({figures.TRAJECTORY: runner.load(
            figures.TRAJECTORY).scheduler['policy']}, doc['policies'])

    def test_from_json_keeps_the_scheduler_and_runs_nothing(self):
        sim.main(self.argv('--scheduler', 'cfs'))
        for mock in self.mocks.values():
            mock.reset_mock()
        path = os.path.join(self.tmp, 'again.json')
        os.rename(os.path.join(self.tmp, 'out.json'), path)
        self.assertEqual(0, sim.main(['--from-json', path, '--out',
                                      os.path.join(self.tmp, 'again.rst')]))
        self.assertEqual(('cfs', {figures.TRAJECTORY: 'cfs'}),
                         self.mocks['document'].call_args.args[-2:])
        for name in ('run_all', 'breakeven', 'run_sensitivity', 'run_cliff'):
            self.assertFalse(self.mocks[name].called, name)
        # the page names the commit the runs were printed at
        with open(path) as f:
            ran_at = json.load(f)['commit']
        self.assertEqual(documents.commit(), ran_at)
        self.assertEqual(document.printed(ran_at, True), self.mocks[
            'document'].call_args.kwargs['first_line'])
        # a document naming a scheduler its runs were not under: refused
        e = self.assertRaises(SystemExit, sim.main, [
            '--from-json', path, '--scheduler', 'eevdf',
            '--out', os.path.join(self.tmp, 'wrong.rst')])
        self.assertEqual(2, e.code)
        self.assertIn('were under cfs', self.err.getvalue())
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'wrong.rst')))
