"""The devstack plugin's phases, run by bash against real files.

devstack itself cannot be brought in at test time (no network but package
registries; it is not on any of them) and would need a whole cloud, so
plugin.sh is sourced the way devstack's ``run_phase`` sources it, after the
smallest stand-ins for the devstack functions it calls (``STANDINS``): each
only logs its call (``iniget`` answers from a table the test gives, ``sudo``
runs its command). Everything else is real: ``settings``, plugin.sh,
``vsmtio-nova-conf`` on real nova.conf files, and the agent config it
writes, loaded by the agent's own options.
"""

import ast
import os
import shutil
import subprocess
import sys
import tempfile

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log
import testtools
import yaml

from vsmtio_agent.conf import agent as agent_conf
from vsmtio_agent.conf import host as host_conf
from vsmtio_agent.conf import publish as publish_conf
from vsmtio_contract import workload
from vsmtio_nova.deploy import ini
from vsmtio_nova.deploy import nova_conf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PLUGIN = os.path.join(ROOT, 'devstack')

STANDINS = r'''
function _log { printf '%s\n' "$*" >> "$CALLS"; }
function echo_summary { :; }
function die { _log die "$@"; exit 1; }
function warn { _log warn "$1" "$2"; }  # devstack's prints no more
function trueorfalse {
    local v=${!2:-$1}
    [[ "${v,,}" =~ ^(true|yes|1|on)$ ]] && echo True || echo False
}
function enable_service { ENABLED_SERVICES+=",$1"; }
# devstack's rule, catch-alls included: "nova" is any n-*, "glance" any g-*.
function is_service_enabled {
    local s
    for s in "$@"; do
        [[ ,$ENABLED_SERVICES, == *,$s,* ]] && return 0
        [[ $s == nova && ,$ENABLED_SERVICES == *,n-* ]] && return 0
        [[ $s == glance && ,$ENABLED_SERVICES == *,g-* ]] && return 0
        [[ $s == neutron && ,$ENABLED_SERVICES == *,q-* ]] && return 0
    done
    return 1
}
function setup_develop { _log setup_develop "$@"; }
function pip_install_gr { _log pip_install_gr "$@"; }
function create_service_user { _log create_service_user "$@"; }
function get_or_create_role { _log get_or_create_role "$@"; }
function get_or_create_user { _log get_or_create_user "$@"; }
function iniset { _log iniset "$@"; }
function inidelete { _log inidelete "$@"; }
function iniget { _log iniget "$@"; echo "${INIGET[$2 $3]:-}"; }
function run_process { _log "run_process $1|$2|${3:-}|${4:-}"; }
function stop_process { _log stop_process "$@"; }
function openstack { _log openstack "$@"; }
function sudo { "$@"; }
declare -A INIGET=([compute cpu_dedicated_set]=2-3
                  [vsmtio min_io_fraction]=${INIGET_MIN_IO:-})
source "$PLUGIN/settings"
for phase in $PHASES; do
    # shellcheck disable=SC2086
    source "$PLUGIN/plugin.sh" ${phase//:/ }
done
# what the phases leave for the plugins after vsmtio's (Prometheus's)
_log "PROMETHEUS_CONFIG_FILE=${PROMETHEUS_CONFIG_FILE:-}"
_log "PROMETHEUS_CUSTOM_SCRAPE_TARGETS=${PROMETHEUS_CUSTOM_SCRAPE_TARGETS:-}"
'''

NOVA_CONF = '''\
[DEFAULT]
compute_driver = libvirt.LibvirtDriver
# devstack's own comment
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
enabled_filters = ComputeFilter,ImagePropertiesFilter
[vsmtio]
io_reservation_capacity_iops = 700
[compute]
provider_config_location = '''

STACK = ('stack:install stack:post-config stack:extra stack:test-config')
ALL_IN_ONE = 'key,n-api,n-sch,n-cond,n-cpu,g-api,placement-api,tempest'
TRAIT_CREATE = ('openstack --os-cloud devstack-admin '
                '--os-placement-api-version 1.6 trait create '
                'CUSTOM_VSMTIO_CONTEXT_RETENTION')

# The scrape job of devstack-plugin-prometheus's own configuration.
NODE_EXPORTER_JOB = {'job_name': 'node',
                     'static_configs': [{'targets': ['localhost:9100']}]}

# What a sample local.conf's localrc sets, read by bash: its assignments
# and services (devstack's enable_service/disable_service/
# disable_all_services rule: a service disabled stays off when a plugin's
# settings enable it later), then the services each plugin's settings
# enable, which devstack sources after local.conf: devstack-plugin-
# prometheus's "prometheus" and "node_exporter", aetos's "aetos", vsmtio's
# "vsmtio-agent" (an unknown plugin is an error here).
READ_LOCALRC = r'''
ENABLED_SERVICES=${ENABLED_SERVICES:-}
DISABLED_SERVICES=
function disable_all_services { ENABLED_SERVICES=; }
function enable_service {
    local s
    for s in "$@"; do
        [[ ,$DISABLED_SERVICES, == *,$s,* ]] || ENABLED_SERVICES+=",$s"
    done
}
function disable_service {
    local s
    for s in "$@"; do
        DISABLED_SERVICES+=",$s"
        ENABLED_SERVICES=$(echo ",$ENABLED_SERVICES," | sed "s/,$s,/,/g")
    done
}
function enable_plugin { PLUGINS+=" $1"; }
eval "$(sed -n '/^\[\[local|localrc\]\]/,/^\[\[/p' "$SAMPLE" |
       sed '1d;/^\[\[/d')"
declare -A PLUGIN_SERVICES=(
    [devstack-plugin-prometheus]="prometheus node_exporter"
    [aetos]=aetos [vsmtio]=vsmtio-agent)
for plugin in $PLUGINS; do
    # shellcheck disable=SC2086
    enable_service ${PLUGIN_SERVICES[$plugin]}
done
ENABLED_SERVICES=$(echo "$ENABLED_SERVICES" | sed 's/,,*/,/g;s/^,//;s/,$//')
for name in ENABLED_SERVICES PLUGINS VIRT_DRIVER VSMTIO_RETENTION \
        VSMTIO_MEASURED_CLASS_SECRET VSMTIO_TEMPEST_HOST_COMMAND \
        SERVICE_PASSWORD Q_HOST ENABLE_CHASSIS_AS_GW HOST_IP \
        VSMTIO_METRICS_TARGETS VSMTIO_METRICS_BIND_HOST; do
    if [[ -n "${!name:-}" ]]; then
        printf '%s=%s\n' "$name" "${!name#,}"
    fi
done
'''


class DevstackPluginTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        bindir = os.path.dirname(sys.executable)
        if not os.path.exists(os.path.join(bindir, 'vsmtio-nova-conf')):
            self.fail('vsmtio-nova-conf is not installed beside %s: '
                      'pip install -e . first' % sys.executable)
        glance = os.path.join(self.dir, 'glance-manage')
        with open(glance, 'w') as f:
            f.write('#!/bin/sh\necho "glance-manage $*" >> "$CALLS"\n')
        os.chmod(glance, 0o755)
        self.calls = os.path.join(self.dir, 'calls')
        self.nova = os.path.join(self.dir, 'nova.conf')
        self.nova_cpu = os.path.join(self.dir, 'nova-cpu.conf')
        # nova's own default location is /etc/nova/provider_config
        self.provider_config = os.path.join(self.dir, 'provider_config',
                                            'vsmtio.yaml')
        self.initial = NOVA_CONF + os.path.dirname(self.provider_config) + (
            '\n')
        for path in (self.nova, self.nova_cpu):
            with open(path, 'w') as f:
                f.write(self.initial)
        self.env = {
            'PATH': os.environ['PATH'], 'CALLS': self.calls,
            'PLUGIN': PLUGIN, 'DEST': self.dir, 'DATA_DIR': self.dir,
            'VSMTIO_DIR': ROOT, 'NOVA_BIN_DIR': bindir,
            'NOVA_CONF': self.nova, 'NOVA_CPU_CONF': self.nova_cpu,
            'GLANCE_BIN_DIR': self.dir, 'GLANCE_CONF_DIR': '/etc/glance',
            'TEMPEST_CONFIG': '/opt/stack/tempest/etc/tempest.conf',
            'TEMPEST_PLUGINS': '0', 'VIRT_DRIVER': 'libvirt',
            'LIBVIRT_GROUP': 'libvirt', 'STACK_USER': str(os.getuid()),
            'ENABLE_DEBUG_LOG_LEVEL': 'True',
            'KEYSTONE_SERVICE_URI': 'http://192.0.2.10/identity',
            'SERVICE_PASSWORD': 'service-password',
            'SERVICE_DOMAIN_NAME': 'Default',
            'SERVICE_PROJECT_NAME': 'service', 'REGION_NAME': 'RegionOne',
            'VSMTIO_CONF_DIR': os.path.join(self.dir, 'etc-vsmtio'),
            'NOVA_CONF_DIR': os.path.join(self.dir, 'etc-nova'),
            'DATABASE_TYPE': 'mysql', 'DATABASE_USER': 'root',
            'DATABASE_PASSWORD': 'db-password',
            'DATABASE_HOST': '192.0.2.10',
            'HORIZON_DIR': os.path.join(self.dir, 'horizon'),
            'NOVA_MY_IP': '192.0.2.10',
        }
        # Horizon's tree, for the nodes that run it
        os.makedirs(os.path.join(self.env['HORIZON_DIR'],
                                 'openstack_dashboard', 'local', 'enabled'))
        if 'PYTHONPATH' in os.environ:  # a tree ahead of the installed one
            self.env['PYTHONPATH'] = os.environ['PYTHONPATH']

    def run_phases(self, phases, services, **env):
        open(self.calls, 'w').close()
        proc = subprocess.run(
            ['bash', '-euc', STANDINS], capture_output=True, text=True,
            env=dict(self.env, PHASES=phases, ENABLED_SERVICES=services,
                     **env))
        with open(self.calls) as f:
            calls = f.read().splitlines()
        return proc, calls

    def stack(self, services=ALL_IN_ONE, **env):
        proc, calls = self.run_phases(STACK, services, **env)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        return calls

    def nova_conf(self, path):
        with open(path) as f:
            return f.read()

    def assert_scheduler_enabled(self, path):
        doc = ini.Document.read(path)
        self.assertEqual(
            ['nova.scheduler.filters.all_filters', nova_conf.FILTER,
             nova_conf.RETENTION_FILTER],
            [u.value for u in doc.find('filter_scheduler',
                                       'available_filters')])
        enabled = doc.find('filter_scheduler', 'enabled_filters')[-1]
        self.assertEqual(
            ['ComputeFilter', 'ImagePropertiesFilter', 'WorkloadMixFilter',
             'ContextRetentionFilter'], ini.split_list(enabled.value))
        weights = doc.find('filter_scheduler', 'weight_classes')[-1]
        self.assertIn(nova_conf.WEIGHER, ini.split_list(weights.value))

    def agent_conf(self):
        conf = cfg.ConfigOpts()
        log.register_options(conf)
        agent_conf.register_opts(conf)
        host_conf.register_opts(conf)
        publish_conf.register_opts(conf)
        conf(['--config-file',
              os.path.join(self.env['VSMTIO_CONF_DIR'], 'vsmtio-agent.conf')],
             project='vsmtio', default_config_files=[])
        return conf

    def test_all_in_one_with_retention_then_unstack_and_clean(self):
        bindir = self.env['NOVA_BIN_DIR']
        calls = self.stack(VSMTIO_RETENTION='True')
        self.assertIn('setup_develop %s' % ROOT, calls)
        self.assert_scheduler_enabled(self.nova)
        # The driver is switched only where nova-compute reads it, and
        # n-cpu restarted as vsmtio-nova-compute.
        driver = ini.Document.read(self.nova_cpu).find(
            'DEFAULT', 'compute_driver')[-1]
        self.assertEqual('vsmtio.VsmtioLibvirtDriver', driver.value)
        self.assertEqual('libvirt.LibvirtDriver', ini.Document.read(
            self.nova).find('DEFAULT', 'compute_driver')[-1].value)
        # What the host tells placement, written before n-cpu restarts.
        with open(self.provider_config) as f:
            self.assertIn('CUSTOM_VSMTIO_IO_IOPS:\n        total: 700',
                          f.read())
        restart = calls.index('stop_process n-cpu')
        self.assertEqual(
            'run_process n-cpu|%s/vsmtio-nova-compute --config-file %s'
            '|libvirt|' % (bindir, self.nova_cpu), calls[restart + 1])
        self.assertIn(
            'glance-manage --config-file /etc/glance/glance-api.conf '
            'db load_metadefs --path %s/etc/metadefs' % ROOT, calls)
        agent = ('run_process vsmtio-agent|%s/vsmtio-agent --config-file '
                 '%s/vsmtio-agent.conf run||root'
                 % (bindir, self.env['VSMTIO_CONF_DIR']))
        self.assertIn(agent, calls)
        conf = self.agent_conf()
        self.assertEqual('libvirt', conf.vsmtio_agent.host_driver)
        self.assertEqual('qemu:///system', conf.vsmtio_agent.libvirt_uri)
        self.assertEqual('2-3', conf.vsmtio_agent.cpu_dedicated_set)
        self.assertIsNone(conf.vsmtio_agent.cpu_shared_set)
        self.assertFalse(conf.vsmtio_agent.dry_run)
        self.assertTrue(conf.debug)
        self.assertEqual(os.path.join(self.dir, 'vsmtio',
                                      'agent-checkpoint.json'),
                         conf.vsmtio_agent.checkpoint_path)
        self.assertIn('iniset /opt/stack/tempest/etc/tempest.conf '
                      'service_available vsmtio True', calls)

        # A second stack.sh run changes nothing more in nova.conf.
        enabled = self.nova_conf(self.nova)
        self.stack(VSMTIO_RETENTION='True')
        self.assertEqual(enabled, self.nova_conf(self.nova))

        proc, calls = self.run_phases('unstack', ALL_IN_ONE)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertIn('stop_process vsmtio-agent', calls)
        self.assertEqual(self.initial, self.nova_conf(self.nova))
        self.assertEqual(self.initial, self.nova_conf(self.nova_cpu))
        self.assertFalse(os.path.exists(self.provider_config))
        for namespace in ('OS::Compute::VSMTIO',
                          'OS::Compute::VSMTIOAggregate'):
            self.assertIn('openstack --os-cloud devstack-admin image '
                          'metadef namespace delete ' + namespace, calls)
        proc, calls = self.run_phases('clean', ALL_IN_ONE)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertFalse(os.path.exists(self.env['VSMTIO_CONF_DIR']))
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'vsmtio')))

    def test_controller_only_runs_no_agent(self):
        calls = self.stack('n-api,n-sch,n-cond,g-api,placement-api')
        self.assert_scheduler_enabled(self.nova)
        self.assertEqual(self.initial, self.nova_conf(self.nova_cpu))
        self.assertEqual([], [c for c in calls if c.startswith(
            ('run_process', 'stop_process'))])
        self.assertFalse(os.path.exists(self.env['VSMTIO_CONF_DIR']))
        self.assertNotIn('tempest.conf', ' '.join(calls))  # no tempest here

    def test_compute_without_retention_keeps_nova_compute(self):
        calls = self.stack('n-cpu', VSMTIO_AGENT_DRY_RUN='yes')
        self.assertEqual(self.initial, self.nova_conf(self.nova_cpu))
        self.assertFalse(os.path.exists(self.provider_config))
        self.assertEqual(['vsmtio-agent'], [
            c.split('|')[0].split()[1] for c in calls
            if c.startswith('run_process')])
        self.assertTrue(self.agent_conf().vsmtio_agent.dry_run)
        self.assertFalse(any('glance-manage' in c for c in calls))

    def test_retention_needs_libvirt(self):
        proc, calls = self.run_phases('stack:install', 'n-cpu',
                                      VSMTIO_RETENTION='True',
                                      VIRT_DRIVER='fake')
        self.assertEqual(1, proc.returncode)
        self.assertIn('VSMTIO_RETENTION=True needs VIRT_DRIVER=libvirt',
                      calls[-1])
        self.assertNotIn('setup_develop', ' '.join(calls))

    def test_tempest_plugins_list_gets_vsmtio_once(self):
        script = ('function trueorfalse { echo False; }\n'
                  'function enable_service { :; }\n'
                  'source "$PLUGIN/settings"\nsource "$PLUGIN/settings"\n'
                  'echo "$TEMPEST_PLUGINS"')
        for given, want in (('0', ROOT), ('/opt/x', '/opt/x ' + ROOT)):
            out = subprocess.run(
                ['bash', '-euc', script], capture_output=True, text=True,
                check=True, env=dict(self.env, TEMPEST_PLUGINS=given))
            self.assertEqual(want, out.stdout.strip())

    # Publishing, the retention trait, tempest's options, the samples.

    def assert_agent_least_privilege(self, calls,
                                     password='service-password'):
        """The agent's user: the vsmtio-agent role, inherited; no admin."""
        self.assertIn('get_or_create_role vsmtio-agent', calls)
        self.assertIn('get_or_create_user vsmtio %s Default' % password,
                      calls)
        self.assertIn('openstack --os-cloud devstack-system-admin role add '
                      '--inherited --user vsmtio --user-domain Default '
                      '--domain Default vsmtio-agent', calls)
        self.assertFalse([c for c in calls if 'admin' in c.split()[-1:]
                          or c.startswith('create_service_user')])

    def test_all_in_one_publishes_with_its_host_s_key(self):
        calls = self.stack()
        # unset in local.conf: settings makes one (with Python: devstack's
        # generate_hex_string needs hexdump, not yet installed then)
        given = 'iniset %s vsmtio measured_class_secret ' % self.nova
        secret = next(c for c in calls if c.startswith(given)).split()[-1]
        self.assertRegex(secret, '^[0-9a-f]{64}$')
        key = workload.derive_host_key(secret, os.uname().nodename)
        # the scheduler holds the root secret; nova-compute and the agent
        # only this host's key
        self.assertIn('iniset %s vsmtio measured_class_secret %s'
                      % (self.nova, secret), calls)
        self.assertIn('inidelete %s vsmtio measured_class_secret'
                      % self.nova_cpu, calls)
        self.assertIn('iniset %s vsmtio measured_class_host_keys %s'
                      % (self.nova_cpu, key), calls)
        self.assertNotIn(secret, '\n'.join(
            c for c in calls if self.nova_cpu in c))
        conf = self.agent_conf()
        publish = conf[publish_conf.GROUP]
        self.assertTrue(publish.enabled)
        self.assertEqual(key, publish.measured_class_key)
        self.assertIsNone(publish.measured_class_secret)
        self.assertEqual('instance', publish.token_scope)
        with open(os.path.join(self.env['VSMTIO_CONF_DIR'],
                               'vsmtio-agent.conf')) as f:
            self.assertNotIn(secret, f.read())
        self.assertEqual(60, publish.interval)
        self.assertEqual(os.uname().nodename, publish.host)
        conf.register_opts(ks_loading.get_auth_plugin_conf_options(
            'password'), group=publish_conf.AUTH_GROUP)
        auth = conf[publish_conf.AUTH_GROUP]
        # no project: the agent scopes a token to each instance's own
        self.assertEqual(('password', 'vsmtio', 'service-password',
                          None, 'http://192.0.2.10/identity'),
                         (auth.auth_type, auth.username, auth.password,
                          auth.project_name, auth.auth_url))
        self.assertEqual(self.nova_cpu, conf.vsmtio_agent.nova_config_file)
        self.assert_agent_least_privilege(calls)
        # nova-api reads the agent's policy from policy.d beside nova.conf
        policy = os.path.join(self.env['NOVA_CONF_DIR'], 'policy.d',
                              'vsmtio.yaml')
        with open(policy) as f, open(os.path.join(
                ROOT, 'etc', 'nova', 'policy.d', 'vsmtio.yaml')) as shipped:
            self.assertEqual(shipped.read(), f.read())
        proc, _calls = self.run_phases('unstack', ALL_IN_ONE)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertFalse(os.path.exists(policy))
        # the trait before any flavor asks (the plugin creates none), with
        # osc-placement installed for it
        self.assertIn('pip_install_gr osc-placement', calls)
        self.assertIn(TRAIT_CREATE, calls)
        tempest = '/opt/stack/tempest/etc/tempest.conf'
        for option in ('host_command sudo sh -c',
                       'libvirt_uri qemu:///system',
                       'retention_capable False',
                       'measured_class_secret ' + secret,
                       'publish_timeout 240',
                       # run on the compute host through host_command
                       'agent_stop_command systemctl stop '
                       'devstack@vsmtio-agent',
                       'agent_start_command systemctl start '
                       'devstack@vsmtio-agent',
                       'agent_checkpoint_path %s/vsmtio/agent-checkpoint'
                       '.json' % self.dir,
                       'filter_min_classified_vcpus 16',
                       # the fleet tests fill nova's default zone; no
                       # Watcher in this cloud
                       'fleet_zone nova',
                       'watcher False',
                       # the host's mix as the operator reads it
                       'node_stats_command mysql -uroot -pdb-password '
                       '-h192.0.2.10 -N -B nova_cell1 -e "SELECT stats FROM '
                       'compute_nodes WHERE host=\'{host}\' AND '
                       'deleted=0"'):
            self.assertIn('iniset %s vsmtio %s' % (tempest, option), calls)

    def test_tempest_acts_on_hosts_only_through_host_command(self):
        # Every tempest option that acts on a compute host is a command
        # line for host_command; none carries its own sudo or ssh, which
        # would only work where tempest runs on that host.
        calls = self.stack()
        tempest = [c.split(None, 3)[2:] for c in calls
                   if c.startswith('iniset /opt/stack/tempest/')]
        commands = {o: v for g, o_v in tempest if g == 'vsmtio'
                    for o, _s, v in [o_v.partition(' ')]
                    if o.startswith('agent_') and o.endswith('_command')}
        self.assertEqual(
            {'agent_stop_command': 'systemctl stop devstack@vsmtio-agent',
             'agent_start_command': 'systemctl start devstack@vsmtio-agent'},
            commands)

    def test_watcher_s_model_carries_flavor_extra_specs(self):
        watcher_conf = os.path.join(self.dir, 'watcher.conf')
        open(watcher_conf, 'w').close()     # watcher's post-config made it
        watcher = 'watcher-api,watcher-decision-engine,watcher-applier'
        iniset = ('iniset %s compute_model enable_extended_attributes True'
                  % watcher_conf)
        calls = self.stack(ALL_IN_ONE + ',' + watcher,
                           WATCHER_CONF=watcher_conf)
        # in post-config and again in extra: whichever plugin runs first,
        # the decision engine starts with it
        self.assertEqual(2, calls.count(iniset))
        for phase in ('stack:post-config', 'stack:extra'):
            proc, calls = self.run_phases(phase, ALL_IN_ONE + ',' + watcher,
                                          WATCHER_CONF=watcher_conf)
            self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
            self.assertEqual(1, calls.count(iniset), phase)
        # no decision engine here: watcher.conf is not touched
        calls = self.stack(ALL_IN_ONE + ',watcher-api',
                           WATCHER_CONF=watcher_conf)
        self.assertFalse([c for c in calls if 'compute_model' in c])
        # no watcher.conf yet (the vsmtio plugin ran first): nothing is
        # written where watcher's own post-config would remove it
        os.unlink(watcher_conf)
        calls = self.stack(ALL_IN_ONE + ',' + watcher,
                           WATCHER_CONF=watcher_conf)
        self.assertFalse([c for c in calls if 'compute_model' in c])

    def test_tempest_fleet_options_follow_the_cloud(self):
        watcher = 'watcher-api,watcher-decision-engine,watcher-applier'
        tempest = 'iniset /opt/stack/tempest/etc/tempest.conf vsmtio '
        calls = self.stack(ALL_IN_ONE + ',' + watcher,
                           VSMTIO_TEMPEST_FLEET_ZONE='vsmtio-fleet')
        self.assertIn(tempest + 'fleet_zone vsmtio-fleet', calls)
        self.assertIn(tempest + 'watcher True', calls)
        # the band is nova.conf's where it sets one, else tempest's default
        # (the same as nova's) stands
        self.assertFalse([c for c in calls if c.startswith(
            (tempest + 'min_io_fraction', tempest + 'max_io_fraction'))])
        calls = self.stack(ALL_IN_ONE + ',watcher-api',
                           VSMTIO_TEMPEST_FLEET_ZONE='',
                           INIGET_MIN_IO='0.25')
        self.assertIn(tempest + 'watcher False', calls)
        self.assertFalse([c for c in calls if 'fleet_zone' in c])
        self.assertIn(tempest + 'min_io_fraction 0.25', calls)
        self.assertIn('iniget %s vsmtio max_io_fraction' % self.nova, calls)

    def test_panel_linked_into_horizon_and_taken_out(self):
        source = os.path.join(ROOT, 'vsmtio_dashboard', 'enabled')
        enabled = os.path.join(self.env['HORIZON_DIR'], 'openstack_dashboard',
                               'local', 'enabled')
        # what Horizon ships there and another plugin's file: not the
        # panel's, left alone
        others = ['__init__.py', '_9001_developer.py.example',
                  '_31000_other_panel.py']
        for name in others:
            open(os.path.join(enabled, name), 'w').close()
        panel = ['_31500_vsmtio_panel_group.py',
                 '_31510_vsmtio_hosts_panel.py']
        self.assertLessEqual(set(panel), set(os.listdir(source)))
        services = ALL_IN_ONE + ',horizon'

        def listed():
            return sorted(os.listdir(enabled))

        # Horizon's local_settings is written before post-config, the
        # static files collected after it: the files come in post-config
        proc, calls = self.run_phases('stack:install', services)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertIn('setup_develop %s' % ROOT, calls)  # Horizon's env too
        self.assertEqual(sorted(others), listed())
        for _round in range(2):     # a second stack.sh links them again
            self.stack(services)
            self.assertEqual(sorted(others + panel), listed())
            for name in panel:
                self.assertEqual(os.path.join(source, name),
                                 os.readlink(os.path.join(enabled, name)))
        for phase in ('unstack', 'clean'):  # clean.sh runs unstack first;
            self.stack(services)            # each takes them out alone
            proc, _calls = self.run_phases(phase, services)
            self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
            self.assertEqual(sorted(others), listed(), phase)
        # no Horizon on this node: nothing in its tree
        self.stack()
        self.assertEqual(sorted(others), listed())

    def test_panel_judges_with_nova_s_mix_options(self):
        local = os.path.join(self.env['HORIZON_DIR'], 'openstack_dashboard',
                             'local')
        settings = os.path.join(local, 'local_settings.py')
        with open(settings, 'w') as f:
            f.write("DEBUG = False\n")

        def options():
            with open(settings) as f:
                lines = f.read().splitlines()
            self.assertEqual('DEBUG = False', lines[0])
            got = [ast.literal_eval(line.partition(' = ')[2])
                   for line in lines
                   if line.startswith('VSMTIO_NOVA_OPTIONS = ')]
            self.assertEqual(1, len(got), lines)
            return got[0]

        services = ALL_IN_ONE + ',horizon'
        self.stack(services)
        self.assertEqual({}, options())     # nova's defaults stand
        self.stack(services, INIGET_MIN_IO='0.25')  # again: one line
        # (the panel reads each value by the option's own type)
        self.assertEqual({'min_io_fraction': '0.25'}, options())

    # Prometheus (devstack-plugin-prometheus) scraping the agents.

    def prometheus_base(self):
        """devstack-plugin-prometheus's own files/prometheus.yml."""
        base = os.path.join(self.dir, 'plugin-prometheus.yml')
        with open(base, 'w') as f:
            yaml.safe_dump({'global': {'scrape_interval': '10s'},
                            'scrape_configs': [NODE_EXPORTER_JOB]}, f)
        return base

    def last(self, calls, name):
        """A variable as the phases left it for the plugins after vsmtio."""
        return [c.partition('=')[2] for c in calls
                if c.startswith(name + '=')][-1]

    def test_metrics_stay_on_loopback_without_prometheus(self):
        base = self.prometheus_base()
        calls = self.stack(PROMETHEUS_CONFIG_FILE=base)
        self.assertEqual('127.0.0.1',
                         self.agent_conf().vsmtio_agent.metrics_bind_host)
        self.assertEqual(base, self.last(calls, 'PROMETHEUS_CONFIG_FILE'))
        self.assertFalse(os.path.exists(os.path.join(
            self.env['VSMTIO_CONF_DIR'], 'prometheus.yml')))

    def test_prometheus_scrapes_every_agent(self):
        base = self.prometheus_base()
        conf = os.path.join(self.env['VSMTIO_CONF_DIR'], 'prometheus.yml')
        services = ALL_IN_ONE + ',prometheus'
        others = '192.0.2.11, 192.0.2.12:9000 2001:db8::13'
        # given before any plugin's post-config, whichever runs first:
        # devstack-plugin-prometheus copies it there
        proc, calls = self.run_phases('stack:install', services,
                                      PROMETHEUS_CONFIG_FILE=base,
                                      VSMTIO_METRICS_TARGETS=others)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertEqual(conf, self.last(calls, 'PROMETHEUS_CONFIG_FILE'))
        for _round in range(2):     # a second stack.sh: one job still
            calls = self.stack(services, PROMETHEUS_CONFIG_FILE=base,
                               VSMTIO_METRICS_TARGETS=others)
            self.assertEqual(conf, self.last(calls,
                                             'PROMETHEUS_CONFIG_FILE'))
            with open(conf) as f:
                config = yaml.safe_load(f)
            # the plugin's own configuration kept, the agents added, with
            # no label of their own (the agents give fqdn)
            self.assertEqual({'scrape_interval': '10s'}, config['global'])
            self.assertEqual(
                [NODE_EXPORTER_JOB,
                 {'job_name': 'vsmtio',
                  'static_configs': [{'targets': [
                      '192.0.2.10:9729', '192.0.2.11:9729',
                      '192.0.2.12:9000', '[2001:db8::13]:9729']}]}],
                config['scrape_configs'])
        # this host's agent listens where Prometheus reaches it
        self.assertEqual('192.0.2.10',
                         self.agent_conf().vsmtio_agent.metrics_bind_host)
        # a custom target list, where given, gets the agents too
        calls = self.stack(services, PROMETHEUS_CONFIG_FILE=base,
                           PROMETHEUS_CUSTOM_SCRAPE_TARGETS='localhost:9090')
        self.assertEqual('localhost:9090,192.0.2.10:9729',
                         self.last(calls, 'PROMETHEUS_CUSTOM_SCRAPE_TARGETS'))

    def test_prometheus_on_a_node_without_agents(self):
        base = self.prometheus_base()
        services = 'n-api,n-sch,n-cond,prometheus'
        calls = self.stack(services, PROMETHEUS_CONFIG_FILE=base)
        self.assertEqual(base, self.last(calls, 'PROMETHEUS_CONFIG_FILE'))
        self.assertTrue([c for c in calls if c.startswith('warn ')
                         and 'VSMTIO_METRICS_TARGETS' in c])
        calls = self.stack(services, PROMETHEUS_CONFIG_FILE=base,
                           VSMTIO_METRICS_TARGETS='192.0.2.11')
        with open(self.last(calls, 'PROMETHEUS_CONFIG_FILE')) as f:
            self.assertEqual(
                {'job_name': 'vsmtio',
                 'static_configs': [{'targets': ['192.0.2.11:9729']}]},
                yaml.safe_load(f)['scrape_configs'][-1])

    def test_compute_scraped_from_elsewhere_binds_where_told(self):
        calls = self.stack('n-cpu', VSMTIO_METRICS_BIND_HOST='192.0.2.11')
        self.assertEqual('192.0.2.11',
                         self.agent_conf().vsmtio_agent.metrics_bind_host)
        self.assertEqual('', self.last(calls, 'PROMETHEUS_CONFIG_FILE'))

    def test_publishing_off(self):
        self.stack(VSMTIO_PUBLISH='False')
        self.assertFalse(self.agent_conf()[publish_conf.GROUP].enabled)

    def sample(self, name):
        """The environment a sample local.conf gives stack.sh."""
        out = subprocess.run(
            ['bash', '-euc', READ_LOCALRC], capture_output=True, text=True,
            check=True, env={'PATH': os.environ['PATH'],
                             'SAMPLE': os.path.join(PLUGIN, name)})
        return dict(line.split('=', 1) for line in out.stdout.splitlines())

    def test_samples_give_the_panel_its_figures(self):
        controller = self.sample('local.conf.controller.sample')
        compute = self.sample('local.conf.compute.sample')
        panel = {'horizon', 'prometheus', 'aetos'}
        # Horizon with the panel, Prometheus and Aetos, on one node (Aetos
        # asks Prometheus at localhost by default); no node_exporter,
        # which the panel does not read
        services = controller.pop('ENABLED_SERVICES').split(',')
        self.assertLessEqual(panel, set(services))
        self.assertNotIn('node_exporter', services)
        self.assertFalse(panel & set(compute['ENABLED_SERVICES'].split(',')))
        # the compute's agent listens on its address, which the
        # controller's Prometheus scrapes
        self.assertEqual(compute['HOST_IP'],
                         compute['VSMTIO_METRICS_BIND_HOST'])
        self.assertNotIn('VSMTIO_METRICS_BIND_HOST', controller)
        self.assertIn(compute['HOST_IP'],
                      controller['VSMTIO_METRICS_TARGETS'].split())

        calls = self.stack(','.join(services), **controller)
        conf = self.last(calls, 'PROMETHEUS_CONFIG_FILE')
        with open(conf) as f:
            self.assertEqual(
                {'job_name': 'vsmtio', 'static_configs': [
                    {'targets': [compute['HOST_IP'] + ':9729']}]},
                yaml.safe_load(f)['scrape_configs'][-1])
        self.assertEqual(
            ['_31500_vsmtio_panel_group.py', '_31510_vsmtio_hosts_panel.py'],
            sorted(os.listdir(os.path.join(
                self.env['HORIZON_DIR'], 'openstack_dashboard', 'local',
                'enabled'))))
        self.assertFalse(os.path.exists(os.path.join(
            self.env['VSMTIO_CONF_DIR'], 'vsmtio-agent.conf')))

        shutil.rmtree(self.env['VSMTIO_CONF_DIR'])
        calls = self.stack(compute.pop('ENABLED_SERVICES'),
                           NOVA_MY_IP=compute['HOST_IP'], **compute)
        self.assertEqual(compute['HOST_IP'],
                         self.agent_conf().vsmtio_agent.metrics_bind_host)
        self.assertEqual('', self.last(calls, 'PROMETHEUS_CONFIG_FILE'))

    def test_all_in_one_sample_stacks_everything_on_one_node(self):
        """local.conf.sample: what tools/devstack-vm ran with stack.sh."""
        aio = self.sample('local.conf.sample')
        self.assertEqual(' vsmtio', aio.pop('PLUGINS'))
        services = aio.pop('ENABLED_SERVICES').split(',')
        self.assertLessEqual({'n-sch', 'n-cpu', 'q-svc', 'ovn-controller',
                              'horizon', 'tempest'}, set(services))
        self.stack(','.join(services), **aio)
        # the agent runs beside nova-compute, its metrics on loopback (no
        # Prometheus here)
        self.assertEqual('127.0.0.1',
                         self.agent_conf().vsmtio_agent.metrics_bind_host)

    def test_samples_stack_a_controller_and_a_compute(self):
        controller = self.sample('local.conf.controller.sample')
        compute = self.sample('local.conf.compute.sample')
        self.assertEqual(' devstack-plugin-prometheus aetos vsmtio',
                         controller.pop('PLUGINS'))
        self.assertEqual(' vsmtio', compute.pop('PLUGINS'))
        self.assertEqual(controller['VSMTIO_MEASURED_CLASS_SECRET'],
                         compute['VSMTIO_MEASURED_CLASS_SECRET'])
        # neutron on OVN, as devstack's own defaults: nova deletes a server
        # only with a network service, so tempest's cleanups need it
        self.assertLessEqual(
            {'q-svc', 'q-ovn-agent', 'ovn-northd', 'ovn-controller',
             'ovs-vswitchd', 'ovsdb-server'},
            set(controller['ENABLED_SERVICES'].split(',')))
        self.assertLessEqual(
            {'q-ovn-agent', 'ovn-controller', 'ovs-vswitchd', 'ovsdb-server'},
            set(compute['ENABLED_SERVICES'].split(',')))
        self.assertNotIn('ovn-northd', compute['ENABLED_SERVICES'])
        # neutron's API and gateway are the controller's (SERVICE_HOST)
        self.assertEqual(('192.0.2.10', 'False'),
                         (compute.pop('Q_HOST'),
                          compute.pop('ENABLE_CHASSIS_AS_GW')))
        self.assertEqual(controller['SERVICE_PASSWORD'],
                         compute['SERVICE_PASSWORD'])

        services = controller.pop('ENABLED_SERVICES')
        calls = self.stack(services, **controller)
        self.assert_scheduler_enabled(self.nova)
        self.assertIn(TRAIT_CREATE, calls)
        self.assert_agent_least_privilege(calls,
                                          controller['SERVICE_PASSWORD'])
        # no agent here (only Prometheus's configuration)
        self.assertFalse(os.path.exists(os.path.join(
            self.env['VSMTIO_CONF_DIR'], 'vsmtio-agent.conf')))
        self.assertIn('iniset /opt/stack/tempest/etc/tempest.conf vsmtio '
                      'host_command ssh stack@{host} sudo', calls)
        for option in ('fleet_zone nova', 'watcher False',
                       'agent_stop_command systemctl stop '
                       'devstack@vsmtio-agent'):
            self.assertIn('iniset /opt/stack/tempest/etc/tempest.conf '
                          'vsmtio ' + option, calls)

        services = compute.pop('ENABLED_SERVICES')
        calls = self.stack(services, **compute)
        self.assertNotIn(TRAIT_CREATE, calls)
        self.assertEqual('vsmtio.VsmtioLibvirtDriver', ini.Document.read(
            self.nova_cpu).find('DEFAULT', 'compute_driver')[-1].value)
        publish = self.agent_conf()[publish_conf.GROUP]
        self.assertTrue(publish.enabled)
        key = workload.derive_host_key(
            compute['VSMTIO_MEASURED_CLASS_SECRET'], os.uname().nodename)
        self.assertEqual(key, publish.measured_class_key)
        # no scheduler on a compute node: no root secret in any nova.conf
        self.assertFalse([c for c in calls if 'measured_class_secret '
                          in c + ' ' and c.startswith('iniset')])
        self.assertIn('iniset %s vsmtio measured_class_host_keys %s'
                      % (self.nova_cpu, key), calls)
        # a host's key given in local.conf is used as it is
        calls = self.stack(services, VSMTIO_MEASURED_CLASS_KEY='given',
                           **compute)
        self.assertEqual('given', self.agent_conf()[
            publish_conf.GROUP].measured_class_key)
