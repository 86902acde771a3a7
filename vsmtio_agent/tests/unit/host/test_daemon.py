"""The daemon's pieces in-process: command line, check, loop, metrics."""

import io
import json
import os
import re
import socket
import sys
import urllib.request

import fixtures
import testtools

from vsmtio_agent.cmd import agent as agent_cmd
from vsmtio_agent import status as status_mod
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_libvirt_driver as tld


DASHBOARD = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))),
    'etc', 'grafana', 'vsmtio.json')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class TestCommandLine(testtools.TestCase):

    def _conf(self, argv):
        return agent_cmd.parse_args(argv, host_fixtures.private_conf())

    def test_run_is_the_default_and_options_override_config(self):
        conf = self._conf(['--host-driver', 'simulated', '--dry-run'])
        self.assertEqual('run', conf.command.name)
        self.assertEqual('simulated', conf.vsmtio_agent.host_driver)
        self.assertTrue(conf.vsmtio_agent.dry_run)

    def test_command_anywhere(self):
        conf = self._conf(['status', '--host-driver', 'libvirt'])
        self.assertEqual('status', conf.command.name)
        self.assertEqual('libvirt', conf.vsmtio_agent.host_driver)


class TestDaemon(tld.DriverTestCase):

    def conf_for(self, **overrides):
        overrides.setdefault('sysfs_root', self.sysfs.root)
        overrides.setdefault('host_driver', 'libvirt')
        return host_fixtures.make_conf(self, **overrides)

    def test_load_driver_takes_only_entry_point_names(self):
        conf = self.conf_for()
        drv = agent_cmd.load_driver(conf)
        self.addCleanup(drv.close)
        self.assertIsInstance(drv, tld.libvirt_driver.LibvirtHostDriver)
        # A module path is not a name: it is never imported.
        for name in ('no_such_driver', 'os:system',
                     'vsmtio_agent.drivers.libvirt:LibvirtHostDriver'):
            conf.set_override('host_driver', name, group='vsmtio_agent')
            exc = self.assertRaises(tld.base.HostDriverError,
                                    agent_cmd.load_driver, conf)
            self.assertIn('cannot load host driver %r' % name, str(exc))

    def test_check_prints_offers_and_missing(self):
        conf = self.conf_for()
        out = self.useFixture(fixtures.MonkeyPatch('sys.stdout',
                                                   io.StringIO())).new_value
        self.assertEqual(0, agent_cmd._check(conf))
        text = out.getvalue()
        self.assertIn('mode: stock', text)
        self.assertIn('core 0   0,4', text)
        self.assertIn('+ libvirt test:///default reachable', text)
        self.assertIn('- per-vCPU instructions: no hardware PMU', text)

    def test_loop_metrics_status_and_restore(self):
        dom = self.useFixture(tld.TestDomain())
        port = free_port()
        # The guard off: this host (libvirt's test driver) counts no
        # instructions, so the guard would keep nothing and pin nothing,
        # and this test is about the loop, metrics, status and restore.
        conf = self.conf_for(period=0.05, metrics_port=port, guard=False)
        svc = agent_cmd.AgentService(conf, periods=4)
        svc.start()
        svc.wait()
        body = urllib.request.urlopen(urllib.request.Request(
            'http://127.0.0.1:%d/metrics' % port,
            headers={'Accept': 'application/openmetrics-text'})).read()
        text = body.decode()
        self.assertIn('vsmtio_vcpu_class{class="', text)
        self.assertIn('domain="%s"' % dom.uuid, text)
        # The labels Watcher's Prometheus datasource reads by default:
        # fqdn on every gauge, resource (the instance UUID) per vCPU.
        # (nova's name of the host: no nova.conf here, so the host name)
        fqdn = 'fqdn="%s"' % socket.gethostname()
        gauges = [line for line in text.splitlines() if line.startswith(
            ('vsmtio_vcpu_', 'vsmtio_host_', 'vsmtio_retention_'))]
        self.assertTrue(gauges)
        for line in gauges:
            self.assertIn(fqdn, line)
            if line.startswith('vsmtio_vcpu_'):
                uuid = re.search(r'domain="([^"]+)"', line).group(1)
                self.assertIn('resource="%s"' % uuid, line)
        self.assertIn('resource="%s"' % dom.uuid, text)
        self.assert_dashboard_matches(text)
        self.assertIn('vsmtio_retention_timeout_seconds', text)
        self.assertIn('vsmtio_periods_total 4.0', text)
        self.assertIn('vsmtio_decisions_total{outcome="applied"} 4.0', text)
        self.assertIn('vsmtio_decisions_total{outcome="failed"} 0.0', text)
        self.assertTrue(text.rstrip().endswith('# EOF'))
        status = conf.vsmtio_agent.status_path
        self.assertTrue(os.path.exists(status))
        # what the daemon wrote passes the reader's checks
        table = status_mod.format_table(status_mod.load(status))
        self.assertIn('| core | domain', table)
        self.assertIn(dom.uuid, table)
        pinned = dom.pins()
        self.assertNotEqual([tld.ALL, tld.ALL], pinned, self.log.output)
        svc.stop()
        self.assertEqual([tld.ALL, tld.ALL], dom.pins())
        self.assertFalse(os.path.exists(status))
        self.assertRaises(OSError, urllib.request.urlopen,
                          'http://127.0.0.1:%d/metrics' % port, timeout=1)

    def test_the_status_file_and_tenants_server_names(self):
        """Names only in a file others cannot read; escaped and cut there.

        A server name is its tenant's text: here with a line break, a
        right-to-left override and a C1 control sequence introducer (all
        that XML lets libvirt's metadata hold), and far too long.
        """
        from xml.sax import saxutils

        from vsmtio_agent.tests.unit.host import test_trust_libvirt
        name = 'evil\n\u202e\x9b31m' + 'x' * 300
        self.useFixture(tld.TestDomain(metadata=lambda dom: (
            test_trust_libvirt.NOVA_METADATA % {
                'name': saxutils.escape(name), 'project': 'p1'})))
        for mode, named in ((0o755, False), (0o700, True)):
            run_dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                   'run')
            os.mkdir(run_dir, mode)
            os.chmod(run_dir, mode)
            conf = self.conf_for(period=0.05, metrics_port=0, guard=False,
                                 status_path=os.path.join(run_dir, 's.json'))
            svc = agent_cmd.AgentService(conf, periods=3)
            svc.start()
            svc.wait()
            try:
                with open(conf.vsmtio_agent.status_path) as f:
                    raw = f.read()
                doc = status_mod.load(conf.vsmtio_agent.status_path)
                table = status_mod.format_table(doc)
            finally:
                svc.stop()
            shown = [vm['name'] for vm in doc['vms'].values() if vm['name']]
            if not named:
                self.assertNotIn('evil', raw)
                self.assertEqual([], shown)
                continue
            [label] = [n for n in shown if n.startswith('evil')]
            self.assertEqual(status_mod.MAX_NAME, len(label))
            self.assertTrue(label.startswith('evil\\n\\u202e\\x9b31mxxx'),
                            label)
            self.assertTrue(label.isprintable())
            self.assertIn('evil\\n\\u202e', table)
            for char in '\u202e\x9b':
                self.assertNotIn(char, table)

    def assert_dashboard_matches(self, text):
        """Every series etc/grafana/vsmtio.json plots is one we export.

        By the families the endpoint declares (``# TYPE``): on this host
        some have no samples (no PMU, no real guest).
        """
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        queried = set()
        for panel in dashboard['panels']:
            for target in panel['targets']:
                queried |= set(re.findall(r'vsmtio_[a-z_]+', target['expr']))
                for label in re.findall(r'(\w+)=~', target['expr']):
                    self.assertIn(label, ('fqdn', 'resource'))
        exported = set()
        for name, kind in re.findall(r'^# TYPE (vsmtio_[a-z_]+) (\w+)$',
                                     text, re.M):
            exported.add(name + ('_total' if kind == 'counter' else ''))
        self.assertEqual(set(), queried - exported)
        self.assertIn('vsmtio_vcpu_retention_rate', queried)

    def test_status_without_a_daemon_observes_in_dry_run(self):
        dom = self.useFixture(tld.TestDomain())
        conf = self.conf_for(period=0.05)
        out = self.useFixture(fixtures.MonkeyPatch('sys.stdout',
                                                   io.StringIO())).new_value
        self.assertEqual(0, agent_cmd._status(conf))
        text = out.getvalue()
        self.assertIn('no running agent', text)
        self.assertIn('dry run', text)
        self.assertIn(dom.uuid, text)
        # the guard says what it kept: this host counts no instructions
        # (CPU time stands in) and no VM serves, so nothing
        self.assertIn('mechanisms kept: none', text)
        self.assertEqual([tld.ALL, tld.ALL], dom.pins())

    def test_check_with_libvirt_down_says_so(self):
        conf = self.conf_for(
            libvirt_uri='qemu+unix:///system?socket=/nonexistent/sock')
        out = self.useFixture(fixtures.MonkeyPatch('sys.stdout',
                                                   io.StringIO())).new_value
        self.assertEqual(0, agent_cmd._check(conf))
        self.assertIn('- libvirt: cannot connect to libvirt',
                      out.getvalue())

    def test_dry_run_changes_nothing(self):
        dom = self.useFixture(tld.TestDomain())
        conf = self.conf_for(period=0.05, metrics_port=0, dry_run=True)
        svc = agent_cmd.AgentService(conf, periods=3)
        svc.start()
        svc.wait()
        self.assertEqual([tld.ALL, tld.ALL], dom.pins())
        self.assertIn('dry run: would set timeout', self.log.output)
        svc.stop()


class TestDryRunsWriteNothing(tld.DriverTestCase):
    """``status``, ``check`` and ``--dry-run`` against a dead agent's mess.

    Real libvirt (``test:///default``): a killed agent left vCPU 0 pinned,
    the knob changed and its checkpoint on disk. None of the observing
    commands may touch any of it, not even rewrite a value unchanged; only
    the daemon's start restores it.
    """

    conf_for = TestDaemon.conf_for

    def setUp(self):
        super().setUp()
        self.dom = self.useFixture(tld.TestDomain())
        self.conf = self.conf_for(period=0.05, metrics_port=0)
        dead = tld.libvirt_driver.LibvirtHostDriver(self.conf)
        dead.sample()
        dead.apply(tld.model.Decision(50000, {
            tld.model.VcpuRef(self.dom.uuid, 0):
                tld.placement(2, tld.model.Role.CPU, 2)}))
        dead.close()    # killed: no restore
        self.left = tld.host_state(self.conf, self.sysfs)
        self.assertEqual([{2}, tld.ALL], self.dom.pins())
        self.assertEqual(50000, self.sysfs.read_knob())
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', io.StringIO()))

    def assertUntouched(self):
        self.assertEqual(self.left, tld.host_state(self.conf, self.sysfs))
        self.assertEqual([{2}, tld.ALL], self.dom.pins())
        self.assertNotIn('did not undo', self.log.output)

    def test_status_check_and_dry_run_then_the_daemon_restores(self):
        self.assertEqual(0, agent_cmd._status(self.conf))
        self.assertIn('dry-run mode', sys.stdout.getvalue())
        self.assertUntouched()
        self.assertEqual(0, agent_cmd._check(self.conf))
        self.assertIn('retention timeout ->', sys.stdout.getvalue())
        self.assertUntouched()
        self.conf.set_override('dry_run', True, group='vsmtio_agent')
        svc = agent_cmd.AgentService(self.conf, periods=3)
        svc.start()
        svc.wait()
        svc.stop()
        self.assertIn('dry run: would set timeout', self.log.output)
        self.assertUntouched()

        # The daemon's start, before its first period, undoes it all.
        self.conf.set_override('dry_run', False, group='vsmtio_agent')
        svc = agent_cmd.AgentService(self.conf, periods=2)
        seen = len(self.log.output)
        svc.start()
        log = self.log.output[seen:]
        self.assertLess(log.index('did not undo'),
                        log.index('vsmtio-agent: stock host'))
        svc.wait()
        svc.stop()
        self.assertEqual([tld.ALL, tld.ALL], self.dom.pins())
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertFalse(os.path.exists(
            self.conf.vsmtio_agent.checkpoint_path))
