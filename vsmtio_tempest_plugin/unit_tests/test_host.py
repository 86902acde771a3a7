"""The tempest plugin reaches a compute host only through ``host_command``.

These run without a cloud: ``host_command`` is given real local commands
(``env VSMTIO_HOST={host} sh -c``, which runs its last argument with the
host's name in the environment, the way ``ssh {host} sudo`` runs it on
that host), so what reaches "the host" is read back (``$$`` in an option
is oslo.config's escape of ``$``). The options are the
plugin's own, registered on a fresh ``ConfigOpts``.
"""

import ast
import os
from unittest import mock

import fixtures
from oslo_config import cfg
from tempest.api.compute import base as compute_base
import testtools

from vsmtio_tempest_plugin import config
from vsmtio_tempest_plugin.tests import base
from vsmtio_tempest_plugin.tests import host
from vsmtio_tempest_plugin.tests.scenario import test_agent_stop
from vsmtio_tempest_plugin.tests.scenario import test_retention
from vsmtio_tempest_plugin.tests.scenario import test_tenant_edits

TESTS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'tests')
#: a "host" that runs the command line with its name in the environment
TAGGING = 'env VSMTIO_HOST={host} sh -c'


def plugin_conf(**vsmtio):
    conf = cfg.ConfigOpts()
    conf.register_opt(config.service_option, group='service_available')
    # by name: a fresh group (oslo.config's copy of the plugin's OptGroup
    # would share its overrides with every other ConfigOpts)
    conf.register_opts(config.opts, group=config.group.name)
    conf([], project='tempest', default_config_files=[])
    conf.set_override('vsmtio', True, group='service_available')
    for name, value in vsmtio.items():
        conf.set_override(name, value, group='vsmtio')
    return conf


class HostAccessTest(testtools.TestCase):

    def use(self, **vsmtio):
        conf = plugin_conf(**vsmtio)
        for module in (host, base, test_tenant_edits):
            self.useFixture(fixtures.MockPatchObject(module, 'CONF', conf))
        return conf

    def test_no_host_command_by_default_and_every_host_test_skips(self):
        self.use()
        self.assertIsNone(host.CONF.vsmtio.host_command)
        reason = ('[vsmtio] host_command is unset: tempest cannot reach '
                  'the compute hosts')
        self.assertEqual(reason, host.missing_access())
        self.assertEqual(reason, host.missing_access('agent_stop_command'))
        with mock.patch.object(compute_base.BaseV2ComputeAdminTest,
                               'skip_checks'):
            cls = test_agent_stop.AgentStopTest
            exc = self.assertRaises(cls.skipException, cls.skip_checks)
            self.assertEqual(reason, str(exc))
        self.assertRaises(base.VsmtioBaseTest.skipException,
                          test_retention.RetentionTest.skip_without_host)
        # a check that forgot to skip fails saying so, running nothing
        exc = self.assertRaises(host.NoHostAccess, host.agent_stop, 'c1')
        self.assertIn('host_command is unset', str(exc))

    def test_each_missing_option_is_named(self):
        self.use(host_command='sh -c', agent_stop_command='true')
        self.assertEqual('[vsmtio] agent_start_command is unset',
                         host.missing_access('agent_stop_command',
                                             'agent_start_command'))
        self.assertIsNone(host.missing_access('agent_stop_command'))
        with mock.patch.object(compute_base.BaseV2ComputeAdminTest,
                               'skip_checks'):
            cls = test_agent_stop.AgentStopTest
            exc = self.assertRaises(cls.skipException, cls.skip_checks)
            self.assertEqual('[vsmtio] agent_start_command is unset',
                             str(exc))

    def test_tenant_edit_test_skips_without_host_access(self):
        # its node stats come from the control plane; stopping the agent
        # needs the host
        self.use(node_stats_command='echo {}', agent_stop_command='true',
                 agent_start_command='true')
        with mock.patch.object(compute_base.BaseV2ComputeAdminTest,
                               'skip_checks'):
            cls = test_tenant_edits.TenantEditTest
            exc = self.assertRaises(cls.skipException, cls.skip_checks)
            self.assertIn('host_command is unset', str(exc))

    def test_agent_stop_and_start_run_on_the_server_s_host(self):
        out = os.path.join(self.useFixture(fixtures.TempDir()).path, 'agent')
        self.use(host_command=TAGGING,
                 agent_stop_command='echo "stop on $$VSMTIO_HOST" >> ' + out,
                 agent_start_command='echo "start on $$VSMTIO_HOST" >> '
                                     + out,
                 agent_checkpoint_path='/nonexistent/checkpoint.json')
        with mock.patch.object(compute_base.BaseV2ComputeAdminTest,
                               'skip_checks'):
            test_agent_stop.AgentStopTest.skip_checks()  # does not skip
        host.agent_stop('compute-2')
        host.agent_start('compute-2')
        with open(out) as f:
            self.assertEqual(['stop on compute-2', 'start on compute-2'],
                             f.read().splitlines())
        # the checkpoint is read there too; none yet is an empty one
        self.assertEqual({}, host.checkpoint('compute-2'))

    def test_a_failure_on_the_host_names_command_and_host(self):
        self.use(host_command=TAGGING, agent_stop_command='exit 3')
        exc = self.assertRaises(host.HostCommandFailed, host.agent_stop,
                                'compute-9')
        self.assertIn('exit 3 on compute-9 failed (3)', str(exc))

    def test_only_host_py_runs_commands_and_never_on_a_host_itself(self):
        # Every other module of the plugin's tests reaches a host through
        # host.py; host.py's one local runner serves the control-plane
        # query (node_stats_command) only.
        importers, local = [], []
        for dirpath, _dirs, files in os.walk(TESTS):
            for name in files:
                if not name.endswith('.py'):
                    continue
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    source = f.read()
                tree = ast.parse(source, path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import) and any(
                            a.name == 'subprocess' for a in node.names):
                        importers.append(os.path.relpath(path, TESTS))
                    if (isinstance(node, ast.Call)
                            and isinstance(node.func, ast.Attribute)
                            and node.func.attr == 'run_here'):
                        local.append(ast.get_source_segment(
                            source, node.args[0]))
        self.assertEqual(['host.py'], importers)
        self.assertEqual(1, len(local))
        self.assertIn('CONF.vsmtio.node_stats_command', local[0])
