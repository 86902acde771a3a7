"""Configuration and status files: every problem is one line and status 2.

Through the real entry point, ``main(argv)``, in-process, with a private
ConfigOpts and temporary files: option parsing, the configuration files,
the start-up validation and the logging set-up all run as they do for an
operator. The property tests (hypothesis) throw values at every option and
bytes at ``status``, and accept only a clean start or one error line with
status 2: never a traceback, never a hang.
"""

import contextlib
import datetime
import io
import json
import logging as py_logging
import math
import os
import re
import subprocess
import sys
import tempfile

import fixtures
import hypothesis
from hypothesis import strategies as st
from oslo_config import cfg
from oslo_config import types as oslo_types
import testtools

from vsmtio_agent.cmd import agent as agent_cmd
from vsmtio_agent import conf as agent_conf
from vsmtio_agent.conf import opts as conf_opts
from vsmtio_agent.conf import types as conf_types
from vsmtio_agent.linux import topology

ERROR = 'vsmtio-agent: error: '
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
COMMANDS = ('run', 'check', 'status')


@contextlib.contextmanager
def isolated_logging():
    """Undo what oslo.log's setup does to this process's logging."""
    root = py_logging.getLogger()
    handlers, level, hook = list(root.handlers), root.level, sys.excepthook
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
        sys.excepthook = hook


def run_main(argv):
    """``main(argv)`` on a fresh ConfigOpts: (status, stdout, stderr)."""
    conf = cfg.ConfigOpts()
    agent_conf.register_opts(conf)
    out, err = io.StringIO(), io.StringIO()
    with isolated_logging(), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        status = agent_cmd.main(argv, conf)
    return status, out.getvalue(), err.getvalue()


class MainTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.status_path = os.path.join(self.tmp, 'status.json')

    def conf_file(self, text, name='agent.conf'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w', encoding='utf-8', errors='surrogatepass') as f:
            f.write(text)
        return path

    def main(self, conf_text, *args):
        """``main`` with the config file ``conf_text``; ``args`` after it.

        ``status_path`` and ``checkpoint_path`` point into the test's
        directory unless ``conf_text`` sets them.
        """
        base = self.conf_file('[vsmtio_agent]\nstatus_path = %s\n'
                              'checkpoint_path = %s\nmetrics_port = 0\n'
                              % (self.status_path,
                                 os.path.join(self.tmp, 'ckpt.json')),
                              'base.conf')
        path = self.conf_file(conf_text)
        return run_main(['--config-file', base, '--config-file', path]
                        + list(args))

    def assertOneLineError(self, result, *fragments):
        status, _out, err = result
        self.assertEqual(2, status, err)
        # oslo.config warns of a deprecated option as it reads it
        lines = [line for line in err.splitlines()
                 if not line.startswith('Deprecated: Option ')]
        self.assertEqual(1, len(lines), err)
        self.assertTrue(lines[0].startswith(ERROR), err)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        return lines[0]


class TestHostDriver(MainTestCase):
    """No silent default, and only the entry point namespace's names."""

    def test_unset_is_refused_naming_the_option_and_the_choices(self):
        for command in COMMANDS:
            self.assertOneLineError(
                self.main('', command), '[vsmtio_agent] host_driver',
                'not set', '--host-driver', 'libvirt', 'simulated')

    def test_the_names_are_the_namespace(self):
        names = agent_cmd.host_driver_names()
        self.assertIn('libvirt', names)
        self.assertIn('simulated', names)

    def test_a_module_path_is_refused_not_imported(self):
        self.useFixture(fixtures.MonkeyPatch(
            'os.system', lambda *a: self.fail('os.system was called')))
        for value in ('os:system', 'vsmtio_agent.drivers.libvirt:'
                      'LibvirtHostDriver', 'Libvirt', ' '):
            line = self.assertOneLineError(
                self.main('', '--host-driver', value, 'check'),
                '[vsmtio_agent] host_driver', 'one of: ', 'libvirt',
                'simulated')
            self.assertIn(repr(value), line)
        path_line = self.assertOneLineError(
            self.main('[vsmtio_agent]\nhost_driver = os:system\n', 'check'),
            "'os:system' is not a host driver")
        self.assertIn(os.path.join(self.tmp, 'agent.conf'), path_line)

    def test_the_shipped_configuration_passes(self):
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        shipped = os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.dirname(os.path.abspath(__file__))))),
            'etc', 'vsmtio', 'vsmtio-agent.conf')
        agent_cmd.parse_args(['--config-file', shipped, 'check'], conf)
        agent_cmd.validate_conf(conf)
        self.assertEqual('libvirt', conf.vsmtio_agent.host_driver)
        self.assertEqual([], agent_cmd.unknown_options(conf))

    def test_named_it_runs(self):
        status, out, err = self.main('', '--host-driver', 'simulated',
                                     'check')
        self.assertEqual(0, status, err)
        self.assertIn('mode: simulated', out)


class TestUnknownOptions(MainTestCase):
    """A misspelt option or group is said by name, never silent."""

    MISSPELT = ('[vsmtio_agent]\nmits = false\nPeriod = 2\n'
                '[Vsmtio_Sim]\nscenarioo = x\n'
                '[vsmtio_agnet]\nmist = false\n'
                '[vsmtio_publish_auth]\nusernmae = bob\n')

    def test_check_prints_each_by_name_with_the_likely_one(self):
        status, out, err = self.main(self.MISSPELT, '--host-driver',
                                     'simulated', 'check')
        self.assertEqual(0, status, err)
        said = [line for line in out.splitlines()
                if line.startswith('configuration: ')]
        path = os.path.join(self.tmp, 'agent.conf')
        for name, close in (('[vsmtio_agent] mits', 'mist'),
                            ('[vsmtio_agent] Period', 'period'),
                            ('[Vsmtio_Sim] scenarioo', 'scenario'),
                            ('[vsmtio_agnet]', 'vsmtio_agent'),
                            ('[vsmtio_publish_auth] usernmae', 'username')):
            line = [s for s in said if s.startswith(
                'configuration: %s in ' % name)]
            self.assertEqual(1, len(line), said)
            self.assertIn(path, line[0])
            self.assertIn('(did you mean %s?)' % close, line[0])
        self.assertEqual(5, len(said), said)

    def test_every_option_of_the_agent_and_its_driver_is_known(self):
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        agent_cmd.parse_args(['--host-driver', 'simulated'], conf)
        # (an auth type that loads: its plugin's names are checked too)

        def value(opt):
            return 'password' if opt.dest == 'auth_type' else 1
        text = ''.join('[%s]\n%s\n' % (group, '\n'.join(
            '%s = %s' % (opt.dest, value(opt)) for opt in opts))
            for group, opts in agent_cmd._opts_to_check(conf))
        self.assertIn('[vsmtio_sim]', text)
        path = self.conf_file(text, 'all.conf')
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        agent_cmd.parse_args(['--config-file', path, '--host-driver',
                              'simulated'], conf)
        self.assertEqual([], agent_cmd.unknown_options(conf))

    def test_the_auth_type_s_own_options_are_known(self):
        path = self.conf_file('[vsmtio_publish_auth]\n'
                              'auth_type = v3applicationcredential\n'
                              'application_credential_id = x\n'
                              'application_credential_secret = y\n'
                              'cafile = /etc/ssl/ca.pem\n', 'auth.conf')
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        agent_cmd.parse_args(['--config-file', path], conf)
        self.assertEqual([], agent_cmd.unknown_options(conf))

    def test_run_warns_once_by_name(self):
        path = self.conf_file(
            '[vsmtio_agent]\nhost_driver = simulated\nperiod = 0.05\n'
            'mits = false\nmetrics_port = 0\nstatus_path = %s\n'
            'checkpoint_path = %s\n'
            % (self.status_path, os.path.join(self.tmp, 'ckpt.json')))
        out = subprocess.run(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', path, 'run', '--periods', '1'],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT))
        self.assertEqual(0, out.returncode, out.stderr[-2000:])
        said = [line for line in (out.stdout + out.stderr).splitlines()
                if 'mits in %s is no option of the agent' % path in line]
        self.assertEqual(1, len(said), out.stdout + out.stderr)
        self.assertIn('WARNING', said[0])


class TestOptionValues(MainTestCase):
    """Numbers, patterns and CPU lists are checked at start."""

    def test_a_metrics_key_or_client_ca_needs_the_certificate(self):
        for name in ('metrics_tls_key_file', 'metrics_tls_client_ca_file'):
            self.assertOneLineError(
                self.main('[vsmtio_agent]\n%s = /etc/x.pem\n' % name,
                          '--host-driver', 'simulated', 'check'),
                '[vsmtio_agent] %s' % name, 'metrics_tls_cert_file is not')

    def test_every_float_option_of_ours_is_finite_and_bounded(self):
        floats = [(group.name, opt) for group, opts in conf_opts.list_opts()
                  for opt in opts if isinstance(opt.type, oslo_types.Float)
                  and group.name != 'vsmtio_publish_auth']
        self.assertGreaterEqual(len(floats), 17)
        for group, opt in floats:
            self.assertIsInstance(opt.type, conf_types.FiniteFloat,
                                  '%s.%s' % (group, opt.dest))
            self.assertIsNotNone(opt.type.min, opt.dest)
            self.assertIsNotNone(opt.type.max, opt.dest)

    def test_non_finite_numbers_are_refused(self):
        for group, name in (('vsmtio_agent', 'period'),
                            ('vsmtio_agent', 'guard_io_halt_rate'),
                            ('vsmtio_publish', 'interval'),
                            ('vsmtio_sim', 'duration')):
            for value in ('nan', 'NaN', '-nan'):
                self.assertOneLineError(
                    self.main('[%s]\n%s = %s\n' % (group, name, value),
                              '--host-driver', 'simulated', 'run'),
                    '[%s] %s in ' % (group, name), 'finite')
            for value in ('inf', '-inf', '1e400'):
                self.assertOneLineError(
                    self.main('[%s]\n%s = %s\n' % (group, name, value),
                              '--host-driver', 'simulated', 'run'),
                    '[%s] %s in ' % (group, name), 'Should be')

    def test_a_library_float_option_is_checked_too(self):
        # keystoneauth1's own options of the compute API session: their
        # type is the library's, so the start-up check catches them
        self.assertOneLineError(
            self.main('[vsmtio_publish_auth]\nconnect_retry_delay = nan\n',
                      '--host-driver', 'simulated', 'check'),
            '[vsmtio_publish_auth] connect_retry_delay', 'finite')

    def test_period_nan_never_starts_the_loop(self):
        # Event.wait(nan) returns at once: a loop with that period would
        # log as fast as it could, so the agent refuses it before starting
        self.assertOneLineError(
            self.main('[vsmtio_agent]\nperiod = nan\n', '--host-driver',
                      'simulated', 'run', '--periods', '3'),
            '[vsmtio_agent] period')
        self.assertFalse(os.path.exists(self.status_path))

    def test_patterns(self):
        for value in ('(', '[a-', 'a{99999999999999}', '(?P<x', '*',
                      '[[a]'):
            for name in ('mist_block_irq_pattern', 'mist_net_irq_pattern'):
                self.assertOneLineError(
                    self.main('[vsmtio_agent]\n%s = %s\n' % (name, value),
                              '--host-driver', 'simulated', 'check'),
                    '[vsmtio_agent] %s in ' % name,
                    'not a regular expression')
        # nested past the compiler's recursion limit
        self.assertRaises(ValueError, conf_types.Pattern(),
                          '(' * 5000 + ')' * 5000)

    def test_cpu_lists(self):
        for value in ('1-x', 'a', '3-1', '^1', ',', '0-99999999999',
                      '8192', '1' * 5000):
            for name in ('cpu_dedicated_set', 'cpu_shared_set',
                         'mist_block_irq_cpus'):
                self.assertOneLineError(
                    self.main('[vsmtio_agent]\n%s = %s\n' % (name, value),
                              '--host-driver', 'simulated', 'check'),
                    '[vsmtio_agent] %s in ' % name)

    def test_good_patterns_and_cpu_lists_are_kept_as_written(self):
        conf = cfg.ConfigOpts()
        agent_conf.register_opts(conf)
        path = self.conf_file('[vsmtio_agent]\ncpu_dedicated_set = 4-15,^8\n'
                              'mist_block_irq_cpus = 0\n'
                              'mist_net_irq_pattern = ^eth\\d+$\n')
        conf(['--config-file', path], default_config_files=[])
        opts = conf.vsmtio_agent
        self.assertEqual('4-15,^8', opts.cpu_dedicated_set)
        self.assertEqual('0', opts.mist_block_irq_cpus)
        self.assertEqual('^eth\\d+$', opts.mist_net_irq_pattern)
        self.assertIsNone(opts.cpu_shared_set)

    def test_an_empty_value_is_not_a_default(self):
        # oslo.config reads it as None: a None period waited forever,
        # a None timeout bound was a TypeError in the first period
        for name in ('period', 'min_timeout_us', 'reschedule_cost_us',
                     'metrics_port', 'sysfs_root',
                     'mist_block_irq_pattern'):
            self.assertOneLineError(
                self.main('[vsmtio_agent]\n%s =\n' % name, '--host-driver',
                          'simulated', 'check'),
                '[vsmtio_agent] %s in ' % name, 'empty', 'default')

    def test_a_multi_line_value_is_still_one_line(self):
        self.assertOneLineError(
            self.main('[vsmtio_agent]\nperiod = 1\n  2\n', '--host-driver',
                      'simulated', 'check'),
            '[vsmtio_agent] period', "'1\\n2'")


class TestFiles(MainTestCase):
    """Configuration and log files that cannot be used."""

    def test_config_file_is_a_directory(self):
        self.assertOneLineError(
            run_main(['--config-file', self.tmp, '--host-driver',
                      'simulated', 'check']),
            'cannot read configuration file %s' % self.tmp,
            'Is a directory')

    def test_config_file_missing(self):
        path = os.path.join(self.tmp, 'nope.conf')
        self.assertOneLineError(
            run_main(['--config-file', path, 'check']), path)

    def test_config_dir_missing(self):
        path = os.path.join(self.tmp, 'nope.d')
        self.assertOneLineError(
            run_main(['--config-dir', path, 'check']), path)

    def test_config_file_unreadable(self):
        # Root reads any regular file; a write-only sysfs attribute it
        # cannot open for reading.
        for path in ('/sys/bus/platform/drivers_probe',
                     '/sys/bus/platform/uevent', '/sys/bus/pci/rescan'):
            try:
                with open(path):
                    continue
            except PermissionError:
                break
            except OSError:
                continue
        else:
            self.skipTest('no file here that this user cannot read')
        self.assertOneLineError(
            run_main(['--config-file', path, '--host-driver', 'simulated',
                      'check']), path)

    def test_config_file_malformed(self):
        for text in ('garbage\n', '[vsmtio_agent\nperiod = 1\n',
                     ' period = 1\n', '[vsmtio_agent]\n= 1\n'):
            self.assertOneLineError(
                run_main(['--config-file', self.conf_file(text),
                          '--host-driver', 'simulated', 'check']),
                os.path.join(self.tmp, 'agent.conf'))

    def test_config_file_not_text(self):
        path = os.path.join(self.tmp, 'binary.conf')
        with open(path, 'wb') as f:
            f.write(b'[vsmtio_agent]\nperiod = \xff\xfe\n')
        self.assertOneLineError(
            run_main(['--config-file', path, '--host-driver', 'simulated',
                      'check']),
            'configuration file %s is not UTF-8 text' % path)

    def test_log_file_in_a_missing_directory(self):
        path = os.path.join(self.tmp, 'missing', 'agent.log')
        self.assertOneLineError(
            self.main('', '--host-driver', 'simulated', '--log-file', path,
                      'check'),
            'cannot open the log', path)
        self.assertOneLineError(
            self.main('[DEFAULT]\nlog_dir = %s\nlog_file = agent.log\n'
                      % os.path.dirname(path), '--host-driver', 'simulated',
                      'check'),
            'cannot open the log', path)

    def test_log_file_is_a_directory(self):
        self.assertOneLineError(
            self.main('', '--host-driver', 'simulated', '--log-file',
                      self.tmp, 'check'),
            'cannot open the log', self.tmp)

    def test_log_config_missing(self):
        path = os.path.join(self.tmp, 'logging.conf')
        self.assertOneLineError(
            self.main('', '--host-driver', 'simulated',
                      '--log-config-append', path, 'check'),
            'cannot set up logging', path)

    def test_bad_command_line_is_one_line_too(self):
        for argv, fragment in (
                (['--bogus'], 'unrecognized arguments: --bogus'),
                (['run', '--periods', 'x'], 'argument --periods'),
                (['run', '--periods', '0'], 'argument --periods'),
                (['--periods', '0'], 'argument --periods'),
                (['nosuch'], 'invalid choice')):
            self.assertOneLineError(run_main(argv), fragment)

    def test_log_file_that_works(self):
        path = os.path.join(self.tmp, 'agent.log')
        status, _out, err = self.main('', '--host-driver', 'simulated',
                                      '--log-file', path, 'check')
        self.assertEqual(0, status, err)
        self.assertTrue(os.path.exists(path))


def status_document(**changes):
    """A status document as the daemon writes it (``status.document``)."""
    doc = {'time': 1.5, 'pid': os.getpid(), 'mode': 'stock', 'period': 0.1,
           'ticks': 7, 'timeout_ns': 200000, 'dry_run': False,
           'vcpus': [{'core': 0, 'domain': 'd1', 'vcpu': 0, 'class': 'io',
                      'retention_rate': 0.2, 'utilisation': 0.5,
                      'ipc': None, 'i_cpu': 0.01, 'pinned': [0]}],
           'mechanisms': ['retention'],
           'verdicts': [{'mechanism': 'retention', 'kept': True,
                         'cpu_ratio': 1.0, 'io_ratio': 1.2,
                         'reason': 'io faster'}],
           'mist': {'d1': {'protect': False, 'reason': 'not short',
                           'i_cpu': None, 'iops': 10.0,
                           'bytes_per_s': None}}}
    doc.update(changes)
    return doc


class TestStatusFile(MainTestCase):
    """``status`` reads another process's file: anything may be in it."""

    def status(self, content):
        mode = 'wb' if isinstance(content, bytes) else 'w'
        with open(self.status_path, mode) as f:
            f.write(content)
        return self.main('', '--host-driver', 'simulated', 'status')

    def test_a_running_agent_s_document_is_a_table(self):
        status, out, err = self.status(json.dumps(status_document()))
        self.assertEqual(0, status, err)
        self.assertIn('| core | domain', out)
        self.assertIn('guard: retention kept (io faster)', out)
        self.assertIn('d1: not protected, I_cpu n/a (not short)', out)

    def test_truncated(self):
        text = json.dumps(status_document())
        for end in (0, 1, len(text) // 2, len(text) - 1):
            self.assertOneLineError(self.status(text[:end]),
                                    self.status_path,
                                    'is not a status document')

    def test_malformed(self):
        for doc, fragment in (
                ([], "at $: [] is not of type 'object'"),
                (status_document(vcpus=None), 'at $.vcpus'),
                (status_document(pid=True), 'at $.pid'),
                (status_document(pid=-1), 'at $.pid'),
                (status_document(pid=2 ** 40), 'at $.pid'),
                (status_document(period='0.1'), 'at $.period'),
                (status_document(mist={'d': {}}), "'protect'"),
                (status_document(verdicts=[{'kept': 1}]), 'at $.verdicts')):
            self.assertOneLineError(self.status(json.dumps(doc)), fragment)
        doc = status_document()
        del doc['ticks']
        self.assertOneLineError(self.status(json.dumps(doc)), "'ticks'")

    def test_numbers_a_table_cannot_print(self):
        text = json.dumps(status_document())
        for bad in ('NaN', 'Infinity', '1e400', '9' * 30, '9' * 5000):
            self.assertOneLineError(
                self.status(text.replace('"period": 0.1',
                                         '"period": %s' % bad)),
                'is not a status document')

    def test_not_text_or_too_deep(self):
        self.assertOneLineError(self.status(b'\xff\xfe{}'),
                                'is not a status document')
        self.assertOneLineError(self.status('[' * 100000),
                                'is not a status document')

    def test_a_directory(self):
        os.mkdir(self.status_path)
        self.assertOneLineError(
            self.main('', '--host-driver', 'simulated', 'status'),
            'cannot read %s' % self.status_path)


# -- properties --------------------------------------------------------------

# An example takes about 10 ms; the deadline is generous for a shared
# machine. A hang would outlast it, and the test's Timeout ends it.
PROPERTY = hypothesis.settings(
    max_examples=60, deadline=datetime.timedelta(seconds=5), database=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow])

NUMBERS = st.one_of(
    st.floats().map(repr),
    st.integers().map(str),
    st.integers(min_value=-10 ** 400, max_value=10 ** 400).map(str),
    st.sampled_from(['nan', 'NaN', '-nan', 'inf', '-Infinity', '1e400',
                     '-1e-400', '0x10', '1_000', '', ' ', '9' * 5000]))
TEXT = st.text(st.characters(blacklist_categories=('Cs',)), max_size=30)
PATTERNS = st.lists(st.sampled_from(
    ['(', ')', '[', ']', '*', '+', '?', '{2}', '{99999999999}', 'a', r'\d',
     '|', '^', '$', '.', '\\', '(?P<x>', '(?<=a)', '(?i)', '{', '}']),
    max_size=12).map(''.join)
CPU_TOKENS = st.one_of(
    st.integers(0, 10 ** 12).map(str),
    st.tuples(st.integers(0, 9000), st.integers(0, 9000)).map(
        lambda r: '%d-%d' % r),
    st.integers(0, 9000).map('^{}'.format),
    st.sampled_from(['', ' ', 'x', '-', '^', '1-', '-1', '0--2']))
CPU_LISTS = st.lists(CPU_TOKENS, max_size=5).map(','.join)
VALUES = st.one_of(NUMBERS, TEXT, PATTERNS, CPU_LISTS,
                   st.sampled_from(['true', 'false', 'libvirt', 'simulated',
                                    'os:system', 'vanilla', '$foo',
                                    '${vsmtio_agent.period}', '$period',
                                    '$$', '${', '%(x)s']))
OPTIONS = sorted((group.name, opt.dest)
                 for group, opts in conf_opts.list_opts() for opt in opts)
KNOWN = {name for _group, name in OPTIONS}


@st.composite
def misspelt(draw):
    """An option's name with one letter dropped, doubled or swapped."""
    group, name = draw(st.sampled_from(OPTIONS))
    i = draw(st.integers(0, len(name) - 1))
    how = draw(st.sampled_from(['drop', 'double', 'swap', 'upper']))
    if how == 'drop':
        typo = name[:i] + name[i + 1:]
    elif how == 'double':
        typo = name[:i] + name[i] + name[i:]
    elif how == 'swap' and i + 1 < len(name):
        typo = name[:i] + name[i + 1] + name[i] + name[i + 2:]
    else:
        typo = name[:i] + name[i].upper() + name[i + 1:]
    hypothesis.assume(typo and typo not in KNOWN and typo.strip() == typo
                      and not typo.startswith(('#', ';', '[')))
    return group, typo


SETTINGS = st.lists(st.one_of(st.tuples(st.sampled_from(OPTIONS), VALUES),
                              st.tuples(misspelt(), VALUES)),
                    min_size=1, max_size=4)


def config_text(settings):
    sections = {}
    for (group, name), value in settings:
        sections.setdefault(group, []).append('%s = %s' % (name, value))
    return ''.join('[%s]\n%s\n' % (group, '\n'.join(lines))
                   for group, lines in sections.items())


class TestProperties(MainTestCase):
    """Any option values, any status file: a clean start or one line."""

    def setUp(self):
        super().setUp()
        self.started = []
        for name in ('_run', '_check', '_status'):
            # The commands themselves are tested elsewhere: here main()
            # stops where the command would start, with what it validated.
            self.useFixture(fixtures.MonkeyPatch(
                'vsmtio_agent.cmd.agent.' + name, self.start))

    def start(self, conf):
        opts = conf.vsmtio_agent
        self.assertIn(opts.host_driver, agent_cmd.host_driver_names())
        for group, option_list in conf_opts.list_opts():
            for opt in option_list:
                try:
                    value = getattr(getattr(conf, group.name), opt.dest)
                except cfg.NoSuchOptError as exc:
                    # an auth plugin's option, registered when it loads;
                    # never a value's ``$name`` the start let through
                    self.assertEqual(opt.dest, exc.opt_name)
                    continue
                if isinstance(value, float):
                    self.assertTrue(math.isfinite(value), opt.dest)
        for name in ('mist_block_irq_pattern', 'mist_net_irq_pattern'):
            re.compile(getattr(opts, name))
        for name in ('cpu_dedicated_set', 'cpu_shared_set',
                     'mist_block_irq_cpus'):
            if getattr(opts, name):
                self.assertTrue(topology.parse_cpu_list(getattr(opts, name)))
        self.started.append(conf.command.name)
        return 0

    def assertCleanOrOneLine(self, result):
        status, _out, err = result
        self.assertNotIn('Traceback', err)
        if status == 0:
            self.assertNotIn(ERROR, err)
        else:
            self.assertOneLineError(result)

    @hypothesis.settings(PROPERTY, max_examples=300)
    @hypothesis.given(settings=SETTINGS,
                      driver=st.sampled_from([None, 'simulated', 'libvirt',
                                              'os:system', '']),
                      command=st.sampled_from(COMMANDS))
    def test_option_values(self, settings, driver, command):
        argv = ['--host-driver', driver] if driver is not None else []
        before = len(self.started)
        result = self.main(config_text(settings), *(argv + [command]))
        self.assertCleanOrOneLine(result)
        self.assertEqual(result[0] == 0, len(self.started) == before + 1)
        if result[0] == 0:
            # no misspelt option passes in silence
            said = result[1] + result[2]
            loads = auth_loads(settings)
            for (group, name), _value in settings:
                if name in KNOWN:
                    continue
                if group == 'vsmtio_publish_auth' and not loads:
                    # a plugin's options are told from typos only once
                    # it loads: that it does not is said instead
                    self.assertIn('[%s] in ' % group, said)
                    self.assertIn('cannot be checked', said)
                else:
                    self.assertIn('[%s] %s in ' % (group, name), said)


def auth_loads(settings):
    """Whether the auth type the settings leave in force loads a plugin."""
    from keystoneauth1 import loading as ks_loading
    auth_type = 'password'
    for (group, name), value in settings:
        if (group, name) == ('vsmtio_publish_auth', 'auth_type'):
            auth_type = str(value).strip() or 'password'
    try:
        ks_loading.get_auth_plugin_conf_options(auth_type)
    except Exception:
        return False
    return True


JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        TEXT, inner, max_size=4),
    max_leaves=12)
DOCUMENT_KEYS = sorted(set(status_document()) - {'pid'})
# Names as a tenant might choose them: control characters, separators,
# bidirectional overrides, and long.
NAMES = st.text(st.characters(blacklist_categories=('Cs',)), max_size=300)


@st.composite
def status_files(draw):
    kind = draw(st.sampled_from(['bytes', 'json', 'mutated', 'truncated']))
    if kind == 'bytes':
        return draw(st.binary(max_size=200))
    if kind == 'json':
        return json.dumps(draw(JSON)).encode()
    doc = status_document()
    if kind == 'mutated':
        for key in draw(st.lists(st.sampled_from(DOCUMENT_KEYS), min_size=1,
                                 max_size=3)):
            if draw(st.booleans()):
                doc.pop(key, None)
            else:
                doc[key] = draw(JSON)
        # the tenant's text where the daemon writes it: server names
        for row in doc['vcpus'] if isinstance(doc.get('vcpus'), list) else ():
            if isinstance(row, dict) and draw(st.booleans()):
                row['server'] = draw(NAMES)
        doc['vms'] = {draw(NAMES): {'name': draw(NAMES), 'has': [
            draw(NAMES)]}}
    text = json.dumps(doc).encode()
    if kind == 'truncated':
        text = text[:draw(st.integers(0, len(text)))]
    return text


class TestStatusProperties(MainTestCase):

    @hypothesis.settings(PROPERTY, max_examples=200)
    @hypothesis.given(content=status_files())
    def test_status_files(self, content):
        with tempfile.NamedTemporaryFile(dir=self.tmp, delete=False) as f:
            f.write(content)
        result = self.main('[vsmtio_agent]\nstatus_path = %s\n' % f.name,
                           '--host-driver', 'simulated', 'status')
        status, out, err = result
        self.assertNotIn('Traceback', err)
        if status == 0:
            self.assertIn('| core | domain', out)
            # whatever text the file holds reaches the terminal escaped
            for line in out.splitlines():
                self.assertTrue(line.isprintable(), repr(line))
        else:
            self.assertOneLineError(result, 'is not a status document')
