"""The configuration files of every service of the one-machine cloud.

Written with :mod:`configparser` from plain dicts, one function per
service. nova's scheduler settings for vsmtio are not written here: the
same code the devstack plugin runs (``vsmtio-nova-conf enable``) adds
them to the nova.conf this module writes.
"""

import configparser
import os
import shutil

from vsmtio_contract import workload

import layout

#: The libvirt host's own measured-class key (its nova-compute and agent
#: hold it; the scheduler and Watcher the root secret it derives from).
HOST_KEY = workload.derive_host_key(layout.MEASURED_CLASS_SECRET,
                                    layout.HOSTNAME)

#: nova.conf's ``[vsmtio] filter_min_classified_vcpus`` here: a host is
#: judged from its first classified vCPU, so that tempest's aggregate
#: override test and the walk's refused boot see the filter act. tempest
#: and the Horizon panel (``VSMTIO_NOVA_OPTIONS``) are told the same.
FILTER_MIN_CLASSIFIED_VCPUS = 1


def write_ini(path, sections):
    parser = configparser.RawConfigParser()
    parser.optionxform = str
    for section, options in sections.items():
        if section != 'DEFAULT':
            parser.add_section(section)
        for key, value in options.items():
            parser.set(section, key, str(value))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write('# written by tools/cloud (vsmtio one-machine cloud)\n')
        parser.write(f)
    return path


def authtoken(user):
    return {
        'www_authenticate_uri': layout.url('keystone'),
        'auth_url': layout.url('keystone'),
        'auth_type': 'password',
        'project_domain_name': 'Default',
        'user_domain_name': 'Default',
        'project_name': 'service',
        'username': user,
        'password': layout.PASSWORD,
        'service_token_roles_required': 'true',
    }


def service_auth(user='nova'):
    """A ``[placement]``/``[neutron]``/... section: service credentials."""
    return {
        'auth_type': 'password',
        'auth_url': layout.url('keystone'),
        'project_domain_name': 'Default',
        'user_domain_name': 'Default',
        'project_name': 'service',
        'username': user,
        'password': layout.PASSWORD,
        'region_name': layout.REGION,
    }


def common(name):
    return {
        'log_file': os.path.join(layout.LOG, name + '.log'),
        'debug': 'false',
    }


def keystone():
    return write_ini(layout.path('etc', 'keystone', 'keystone.conf'), {
        'DEFAULT': common('keystone'),
        'database': {'connection': layout.db_url('keystone')},
        'token': {'provider': 'fernet'},
        # every service authenticates with a password: bcrypt's cheapest
        # cost keeps that from dominating a 2-core test cloud
        'identity': {'password_hash_algorithm': 'bcrypt',
                     'password_hash_rounds': 4},
        'fernet_tokens': {
            'key_repository': layout.path('data', 'keystone', 'fernet')},
        'fernet_receipts': {
            'key_repository': layout.path('data', 'keystone', 'receipts')},
        'credential': {
            'key_repository': layout.path('data', 'keystone', 'credential')},
    })


def glance():
    images = layout.path('data', 'glance', 'images')
    for sub in ('images', 'staging', 'tasks'):
        os.makedirs(layout.path('data', 'glance', sub), exist_ok=True)
    return write_ini(layout.path('etc', 'glance', 'glance-api.conf'), {
        'DEFAULT': dict(common('glance-api'),
                        enabled_backends='fs:file',
                        bind_host=layout.HOST,
                        bind_port=layout.PORTS['glance'],
                        workers=1),
        'database': {'connection': layout.db_url('glance')},
        'glance_store': {'default_backend': 'fs'},
        'fs': {'filesystem_store_datadir': images},
        'os_glance_staging_store': {
            'filesystem_store_datadir': layout.path('data', 'glance',
                                                    'staging')},
        'os_glance_tasks_store': {
            'filesystem_store_datadir': layout.path('data', 'glance',
                                                    'tasks')},
        'keystone_authtoken': authtoken('glance'),
        'paste_deploy': {'flavor': 'keystone'},
        'oslo_concurrency': {
            'lock_path': layout.path('data', 'glance', 'locks')},
    })


def placement():
    return write_ini(layout.path('etc', 'placement', 'placement.conf'), {
        'DEFAULT': common('placement'),
        'placement_database': {'connection': layout.db_url('placement')},
        'api': {'auth_strategy': 'keystone'},
        'keystone_authtoken': authtoken('placement'),
    })


def neutron():
    """neutron-server (API only, ML2 with no agents).

    The guests have no network (``networks: none``), but nova asks
    neutron for an instance's ports when it deletes it, so a real
    neutron API must answer.
    """
    etc = layout.path('etc', 'neutron')
    write_ini(os.path.join(etc, 'plugins', 'ml2', 'ml2_conf.ini'), {
        'ml2': {'type_drivers': 'flat', 'tenant_network_types': '',
                'mechanism_drivers': '', 'extension_drivers': ''},
    })
    return write_ini(os.path.join(etc, 'neutron.conf'), {
        'DEFAULT': dict(common('neutron'),
                        core_plugin='ml2', service_plugins='router',
                        auth_strategy='keystone',
                        bind_host=layout.HOST,
                        bind_port=layout.PORTS['neutron'],
                        transport_url=layout.transport_url(),
                        notify_nova_on_port_status_changes='false',
                        notify_nova_on_port_data_changes='false',
                        api_workers=1, rpc_workers=0,
                        api_paste_config=os.path.join(etc, 'api-paste.ini')),
        'database': {'connection': layout.db_url('neutron')},
        'keystone_authtoken': authtoken('neutron'),
        'nova': service_auth('nova'),
        'oslo_concurrency': {
            'lock_path': layout.path('data', 'neutron', 'locks')},
    })


def nova(compute_driver):
    etc = layout.path('etc', 'nova')
    os.makedirs(etc, exist_ok=True)
    paste = os.path.join(os.path.dirname(layout.BIN), 'etc', 'nova',
                         'api-paste.ini')
    shutil.copy(paste, os.path.join(etc, 'api-paste.ini'))
    state = layout.path('data', 'nova')
    sections = {
        'DEFAULT': dict(common('nova'),
                        host=layout.HOSTNAME,
                        my_ip=layout.HOST,
                        state_path=state,
                        instances_path=os.path.join(state, 'instances'),
                        transport_url=layout.transport_url(),
                        compute_driver=compute_driver,
                        default_schedule_zone=layout.DEFAULT_ZONE,
                        osapi_compute_listen=layout.HOST,
                        metadata_listen=layout.HOST,
                        # TCG guests are slow to boot: nova must not give up
                        instance_build_timeout=0,
                        # one machine: no CPU or RAM overcommit surprises
                        initial_cpu_allocation_ratio=4.0,
                        initial_ram_allocation_ratio=1.5,
                        heal_instance_info_cache_interval=-1,
                        # the compute service is up as soon as it reports
                        report_interval=5,
                        service_down_time=60,
                        # down stops the services: no minute-long drain
                        graceful_shutdown_timeout=5),
        'api': {'auth_strategy': 'keystone'},
        'wsgi': {'api_paste_config': os.path.join(etc, 'api-paste.ini')},
        'api_database': {'connection': layout.db_url('nova_api')},
        'database': {'connection': layout.db_url('nova')},
        'keystone_authtoken': authtoken('nova'),
        'service_user': dict(service_auth('nova'),
                             send_service_user_token='true'),
        'placement': service_auth('placement'),
        'neutron': service_auth('neutron'),
        'glance': {'api_servers': layout.url('glance')},
        'scheduler': {'discover_hosts_in_cells_interval': -1,
                      'workers': 1},
        'conductor': {'workers': 1},
        'libvirt': {'virt_type': 'qemu',
                    'connection_uri': layout.LIBVIRT_URI,
                    'cpu_mode': 'none'},
        'vnc': {'enabled': 'false'},
        'spice': {'enabled': 'false'},
        'serial_console': {'enabled': 'false'},
        'oslo_concurrency': {'lock_path': os.path.join(state, 'locks')},
        'oslo_messaging_notifications': {'driver': 'noop'},
        # one file for the scheduler and the libvirt host's nova-compute
        # (one machine): the root secret for the one, the host's key for
        # the other
        'vsmtio': {'measured_class_secret': layout.MEASURED_CLASS_SECRET,
                   'measured_class_host_keys': HOST_KEY,
                   'filter_min_classified_vcpus':
                       FILTER_MIN_CLASSIFIED_VCPUS},
        'compute': {'max_concurrent_builds': 2,
                    # the cloud's own, not the machine's /etc/nova
                    'provider_config_location': layout.path(
                        'etc', 'nova', 'provider_config')},
        'os_vif_ovs': {'ovsdb_connection': 'unix:/nonexistent'},
    }
    # nova-compute runs as root here: its privsep helpers start directly,
    # not through sudo and nova-rootwrap (neither is installed).
    helper = '%s --config-file %s' % (
        os.path.join(layout.BIN, 'privsep-helper'),
        os.path.join(etc, 'nova.conf'))
    for section in ('nova_sys_admin', 'privsep_osbrick',
                    'vif_plug_ovs_privileged',
                    'vif_plug_linux_bridge_privileged'):
        sections[section] = {'helper_command': helper}
    return write_ini(os.path.join(etc, 'nova.conf'), sections)


def agent(nova_user_password=layout.PASSWORD):
    """The vsmtio agent on the compute node: libvirt driver + publishing."""
    return write_ini(layout.path('etc', 'vsmtio', 'vsmtio-agent.conf'), {
        'DEFAULT': dict(common('vsmtio-agent')),
        'vsmtio_agent': {
            'host_driver': 'libvirt',
            'libvirt_uri': layout.LIBVIRT_URI,
            # The product's defaults for everything the agent decides (its
            # period, the guard): the cloud shows what an operator gets.
            'checkpoint_path': layout.path('data', 'vsmtio',
                                           'agent-checkpoint.json'),
            'status_path': layout.path('run', 'vsmtio-agent-status.json'),
            'metrics_bind_host': layout.HOST,
            'metrics_port': layout.PORTS['agent-metrics'],
            # the metrics' fqdn is nova's [DEFAULT] host, read from it
            'nova_config_file': layout.path('etc', 'nova', 'nova.conf'),
        },
        'vsmtio_publish': {
            'enabled': 'true',
            # the measured class is signed for nova's name of this host
            'host': layout.HOSTNAME,
            'interval': 10,
            'measured_class_key': HOST_KEY,
            # a token per instance project, as the vsmtio-agent role
            'token_scope': 'instance',
        },
        'vsmtio_publish_auth': dict(service_auth('vsmtio'),
                                    password=nova_user_password),
    })


#: The simulated host's scenario: the simulator's default, a serving VM
#: (sockperf) beside a computing one (matmul) on 24 cores, where the
#: guard keeps retention for the serving VM within seconds and drops the
#: split for what it costs the computing one: a host page with decisions
#: both ways within the few minutes of the ``observe`` step. (The README's
#: demo pair settles over minutes of simulated time.)
SIM_SCENARIO = 'sockperf_matmul'


def sim_agent():
    """A second agent, on the embedded simulated SMT host.

    The real agent and the real policy on a model of a host where the
    product acts (SMT siblings, the patched kernel's per-VM timeouts, an
    instruction counter), which this machine's TCG guests cannot give:
    the panel then shows decisions and their reasons. It names its
    metrics ``SIM_HOSTNAME`` and exports ``vsmtio_host_mode{mode=
    "simulated"}``, so it is never taken for a compute host, and it
    publishes nothing to nova (its VMs are the model's). The model runs
    at the wall clock's pace (``real_time``), not on a whole core.
    """
    return write_ini(layout.path('etc', 'vsmtio', 'vsmtio-agent-sim.conf'), {
        'DEFAULT': dict(common('vsmtio-agent-sim')),
        'vsmtio_agent': {
            'host_driver': 'simulated',
            'checkpoint_path': layout.path('data', 'vsmtio',
                                           'agent-sim-checkpoint.json'),
            'status_path': layout.path('run',
                                       'vsmtio-agent-sim-status.json'),
            'metrics_bind_host': layout.HOST,
            'metrics_port': layout.PORTS['agent-metrics-sim'],
            'metrics_host': layout.SIM_HOSTNAME,
        },
        'vsmtio_publish': {'enabled': 'false'},
        # the paper's CFS: under EEVDF every sockperf wake-up switches
        # (about 400k vCPU switches/s), and the model then runs this host
        # at a tenth to a quarter of the wall clock's pace, too slow to
        # show a decision within the observe step
        'vsmtio_sim': {'scenario': SIM_SCENARIO, 'scheduler': 'cfs',
                       'real_time': 'true'},
    })


def libvirt():
    """libvirtd's own configuration directory.

    It is mounted over /etc/libvirt in libvirtd's mount namespace only:
    the host's /etc/libvirt is left untouched.
    """
    etc = layout.path('etc', 'libvirt')
    os.makedirs(etc, exist_ok=True)
    os.makedirs(layout.LIBVIRT_SOCK_DIR, exist_ok=True)
    with open(os.path.join(etc, 'libvirtd.conf'), 'w') as f:
        f.write('unix_sock_dir = "%s"\nunix_sock_group = "root"\n'
                'unix_sock_rw_perms = "0770"\nauth_unix_rw = "none"\n'
                'auth_unix_ro = "none"\nlog_outputs = "3:stderr"\n'
                % layout.LIBVIRT_SOCK_DIR)
    with open(os.path.join(etc, 'qemu.conf'), 'w') as f:
        f.write('user = "root"\ngroup = "root"\nstdio_handler = "file"\n'
                'cgroup_controllers = [ "cpu", "cpuacct", "cpuset" ]\n')
    return etc
