"""The kernel bench on a guest's CFS kernel: its plan, its parsing, a boot.

``guest_image_elements/tools/kernel_guest.py`` is a script beside the
guest tools it imports (``guest_boot``), loaded here as ``test_balloon``
loads its tools.
"""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

import testtools

from vsmtio_bench import kernel
from vsmtio_bench import kernel_page

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                     'guest_image_elements', 'tools')


def _load(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(TOOLS, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


guest_boot = _load('guest_boot')
kernel_guest = _load('kernel_guest')


def _args(**kw):
    a = dict(profiles=[(50, 200)], threads=[4], ratios=[1.0, 4.0],
             repetitions=2, seed=0, warmup=0.1, seconds=0.5,
             small_seconds=0.2, switch_round_trips=2000, cpu=None,
             timeout=600, scale=1)
    a.update(kw)
    return argparse.Namespace(**a)


def _point(rep, key, rps=None, spinner=None):
    figs = []
    if rps is not None:
        figs.append('requests_per_s=%g server_cpu=0.5 requests=10 '
                    'wake_mean_us=20 wake_p99_us=90 wake_p999_us=200' % rps)
    if spinner is not None:
        figs.append('spinner_cpu=%g spinner_iterations_per_s=1' % spinner)
    return 'VSMTIO point=%d|%s|%s\n' % (rep, key, ' '.join(figs))


class PlanTest(testtools.TestCase):

    def test_every_point_in_the_kernel_bench_s_orders(self):
        text, groups_of = kernel_guest.plan(_args())
        self.assertEqual([(50, 200, 4)], groups_of)
        points = [line.rsplit("'", 2)[1] for line in text.splitlines()
                  if line.startswith('/sched_guest point')]
        # per repetition: the spinner alone, the server alone and each
        # ratio (ascending, then descending), then the small points
        self.assertEqual(['0|spinner alone', '0|b50/w200 t4 alone',
                          '0|b50/w200 t4 r1', '0|b50/w200 t4 r4',
                          '1|spinner alone', '1|b50/w200 t4 r4',
                          '1|b50/w200 t4 r1', '1|b50/w200 t4 alone'],
                         points[:8])
        self.assertEqual(8 + 2 * len(kernel.small_points()), len(points))
        self.assertEqual(2, text.count('/sched_guest switch 2000'))

    def test_the_server_s_weight_is_the_ratio_on_cgroup_v2(self):
        text, _ = kernel_guest.plan(_args(repetitions=1))
        lines = text.splitlines()
        i = lines.index([x for x in lines if "'0|b50/w200 t4 r4'" in x][0])
        self.assertEqual('weights 400 100', lines[i - 1])
        # microseconds become the program's nanoseconds
        self.assertIn('point $NSI 50000 200000 0 4 1 0.5 0.1', lines[i])


class ParseTest(testtools.TestCase):

    def console(self):
        lines = ['VSMTIO begin=1\n', 'VSMTIO kernel=6.1.0-57-amd64\n',
                 'VSMTIO burst_20=21000 20000 30000\n',
                 'VSMTIO burst_50=51000 50000 60000\n',
                 'VSMTIO burst_500=501000 500000 600000\n']
        for rep, alone in ((0, 1000.0), (1, 2000.0)):
            lines.append(_point(rep, 'spinner alone', spinner=0.99))
            lines.append(_point(rep, 'b50/w200 t4 alone', rps=alone))
            lines.append(_point(rep, 'b50/w200 t4 r1', rps=alone / 2,
                                spinner=0.5))
            lines.append(_point(rep, 'b50/w200 t4 r4', rps=alone * 0.8,
                                spinner=0.2))
            lines.append(_point(rep, 'small|wake b20/w50 alone', rps=5.0))
            lines.append('VSMTIO switch=%d %d\n' % (1000 + rep, 5000))
        return ''.join(lines + ['VSMTIO end=1\n'])

    def test_each_repetition_is_normalised_by_its_own_server_alone(self):
        report, reps, rows, bursts = kernel_guest.parse(
            self.console(), _args(), [(50, 200, 4)])
        self.assertEqual('6.1.0-57-amd64', report['kernel'])
        r4 = reps['weights']['b50/w200 t4 r4']
        self.assertEqual([0.8, 0.8], [r['server_norm'] for r in r4])
        self.assertEqual([1000.0, 2000.0],
                         [r['requests_per_s'] for r in
                          reps['weights']['b50/w200 t4 alone']])
        self.assertEqual([{'spinner_cpu': 0.99}] * 2,
                         reps['weights']['spinner alone'])
        self.assertEqual(['wake b20/w50 alone'], list(reps['small']))
        self.assertEqual([1000.0, 1001.0], rows['pipe_baseline_ns'])
        self.assertEqual([5000.0, 5000.0], rows['round_trip_one_cpu_ns'])
        self.assertEqual({'target_us': 500, 'median_us': 501.0,
                          'min_us': 500.0, 'p99_us': 600.0}, bursts['500'])

    def test_a_console_cut_short_is_an_error(self):
        console = self.console().replace('VSMTIO end=1\n', '')
        self.assertRaises(guest_boot.GuestError, kernel_guest.parse,
                          console, _args(), [(50, 200, 4)])


class GuestBootTest(testtools.TestCase):
    """One short boot of Debian's 6.1 (CFS) running a small plan."""

    def test_weights_move_the_cpu_on_the_guest_s_cfs(self):
        if os.geteuid() != 0:
            self.skipTest('needs root (QEMU on a chosen CPU, the kernel '
                          'package)')
        for tool in ('qemu-system-x86_64', 'cc', 'cpio', 'taskset'):
            if not shutil.which(tool):
                self.skipTest('%s missing: run .ci/install-debian-packages'
                              % tool)
        host, real, unmeasured, report, tunables = kernel_guest.measure(
            _args(repetitions=1, scale=2))
        self.assertEqual('CFS', host['scheduler'])
        self.assertEqual(1, host['cpus'])
        # the guest's own CFS tunables, read from its debugfs, scaled
        # with the bench's times
        self.assertEqual('6000000', report['default_latency_ns'])
        self.assertEqual(12000000, tunables['latency_ns'])
        self.assertEqual(2000000, tunables['wakeup_granularity_ns'])
        w = real['weights']
        self.assertGreater(w['spinner alone']['spinner_cpu']['median'], 0.8)
        low, high = w['b50/w200 t4 r1'], w['b50/w200 t4 r4']
        self.assertLess(high['spinner_cpu']['median'],
                        low['spinner_cpu']['median'])
        self.assertGreater(high['server_cpu']['median'],
                           low['server_cpu']['median'])
        self.assertGreater(real['switches']['context_switch_ns'], 0)
        prof = kernel_guest.profile_of(host, real, report, tunables,
                                       unmeasured, 'a test')
        self.assertEqual('cfs', prof['scheduler']['policy'])
        self.assertEqual(12000, prof['scheduler']['latency_us'])
        self.assertIn('2 times its default 6000000 ns',
                      prof['sources']['scheduler.latency_us'])


class GuestPageTest(testtools.TestCase):

    def test_a_guest_s_page_says_where_and_how_it_ran(self):
        from vsmtio_bench.tests import test_kernel
        prof = test_kernel._profile()
        prof['host'].update(
            python=None, preempt='none (voluntary) full',
            guest={'qemu': 'qemu-system-x86_64 -accel tcg', 'host_cpu': 1,
                   'host_kernel': '6.18', 'clocksource': 'tsc',
                   'scale': 10, 'scaled': ['latency_ns']})
        text = kernel_page.render(prof)
        self.assertIn('kernel_guest.py', text)
        self.assertIn('The guest program\'s timing', text)
        self.assertIn('burst and wait are 10 times the host bench\'s', text)
        self.assertNotIn('Python\'s', text)
        self.assertIn('what the guest program does around each pipe', text)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'p.json')
            kernel.write_json(path, prof)
            self.assertTrue(os.path.getsize(path))
