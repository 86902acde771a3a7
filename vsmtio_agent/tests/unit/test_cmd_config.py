"""A bad configuration stops ``vsmtio-agent`` with one line, not a traceback.

The command runs in a subprocess, as an operator would start it, so the
test covers option parsing, the start-up validation and the exit status
(``test_config`` covers every path in-process).
"""

import os
import subprocess
import sys
import tempfile

import testtools


def run_agent(conf_text, *args, driver=('--host-driver', 'simulated')):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'agent.conf')
        with open(path, 'w') as f:
            f.write(conf_text)
        proc = subprocess.run(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', path] + list(driver) + list(args),
            capture_output=True, text=True, timeout=120)
    return proc, path


class TestBadConfiguration(testtools.TestCase):

    def assertOneLineError(self, proc, *fragments):
        self.assertEqual(2, proc.returncode, proc.stderr)
        self.assertNotIn('Traceback', proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines()
                 if ln.startswith('vsmtio-agent: error:')]
        self.assertEqual(1, len(lines), proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_unparsable_value_names_option_and_file(self):
        proc, path = run_agent('[vsmtio_agent]\nperiod = abc\n', 'check')
        self.assertOneLineError(proc, '[vsmtio_agent] period', path,
                                "'abc'")

    def test_out_of_bounds_value(self):
        proc, _ = run_agent('[vsmtio_agent]\nmax_timeout_us = 0\n', 'check')
        self.assertOneLineError(proc, '[vsmtio_agent] max_timeout_us')

    def test_bounds_that_contradict_each_other(self):
        proc, _ = run_agent('[vsmtio_agent]\nmin_timeout_us = 500\n'
                            'max_timeout_us = 100\n', 'check')
        self.assertOneLineError(proc, 'min_timeout_us (500)',
                                'max_timeout_us (100)')

    def test_bad_simulator_option(self):
        proc, _ = run_agent('[vsmtio_sim]\nkernel = bsd\n', 'check')
        self.assertOneLineError(proc, '[vsmtio_sim] kernel', 'bsd')

    def test_no_host_driver_is_refused(self):
        # as on a compute host whose operator forgot it: no daemon that
        # manages nothing
        proc, _ = run_agent('[vsmtio_agent]\nperiod = 0.05\n', 'run',
                            '--periods', '1', driver=())
        self.assertOneLineError(proc, '[vsmtio_agent] host_driver',
                                'libvirt', 'simulated')

    def test_period_nan_is_refused(self):
        proc, path = run_agent('[vsmtio_agent]\nperiod = nan\n', 'run',
                               '--periods', '3')
        self.assertOneLineError(proc, '[vsmtio_agent] period', path,
                                'finite')

    def test_log_file_in_a_missing_directory(self):
        proc, _ = run_agent('', '--log-file', '/nonexistent/dir/agent.log',
                            'check')
        self.assertOneLineError(proc, 'cannot open the log',
                                '/nonexistent/dir/agent.log')

    def test_good_configuration_runs(self):
        proc, _ = run_agent('[vsmtio_agent]\nperiod = 0.05\n', 'check')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('mode: simulated', proc.stdout)
