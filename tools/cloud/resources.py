"""What the cloud holds once its services run, and tempest against it.

Identity (service users, catalogue), images and flavors are made through
openstacksdk as an operator would; tempest's configuration names them.
"""

import difflib
import os
import shutil
import subprocess
import time

import catalogue
import configs
import doc_commands
import doc_runner
import fleet
import image
import layout
import procs
import watcher

SERVICE_USERS = ('glance', 'nova', 'placement', 'neutron')
ENDPOINTS = (
    ('glance', 'image', 'glance', ''),
    ('placement', 'placement', 'placement', ''),
    ('neutron', 'network', 'neutron', ''),
    ('nova', 'compute', 'nova-api', '/v2.1'),
)
FLAVORS = {
    # name: (vcpus, ram MiB, extra specs)
    'vsmtio.tiny': (1, 128, {}),
    # Their classes are set by scheduler.rst's own commands (DOC_FLAVORS).
    'vsmtio.io': (1, 128, {}),
    'vsmtio.cpu': (1, 128, {}),
    # Retention is given only to dedicated CPUs, and only where placement
    # finds the trait (this cloud runs TCG: it has none, and tempest checks
    # that such a flavor finds no host). Its extra specs are set by
    # install.rst's own command.
    'vsmtio.retention': (1, 128, {}),
}
#: Flavors whose extra specs the docs' ``flavor set`` commands give:
#: cloud's name: (doc, the command's leading words, its flavor's name).
DOC_FLAVORS = {
    'vsmtio.io': ('scheduler.rst', ('openstack', 'flavor', 'set',
                                    '--property', 'vsmtio:workload=io'),
                  'db.large'),
    'vsmtio.cpu': ('scheduler.rst', ('openstack', 'flavor', 'set',
                                     '--property', 'vsmtio:workload=cpu'),
                   'batch.xlarge'),
    'vsmtio.retention': ('install.rst', ('openstack', 'flavor', 'set'),
                         'm1.retaining'),
}
CLOUD = doc_runner.CLOUD


def connect():
    import openstack
    return openstack.connect(
        auth_url=layout.url('keystone', '/v3'), username='admin',
        password=layout.PASSWORD, project_name='admin',
        user_domain_name='Default', project_domain_name='Default',
        region_name=layout.REGION, compute_api_version='2.latest')


def identity():
    conn = connect()
    idn = conn.identity
    service_project = (idn.find_project('service') or idn.create_project(
        name='service', domain_id='default'))
    roles = {r.name: r for r in idn.roles()}
    for name in ('admin', 'member', 'reader', 'service', 'manager'):
        if name not in roles:
            roles[name] = idn.create_role(name=name)
    for name in SERVICE_USERS:
        catalogue.service_user(conn, name, service_project)
    for name, stype, port_name, suffix in ENDPOINTS:
        catalogue.service(conn, name, stype, layout.url(port_name, suffix))
    write_clouds_yaml()
    # the agent's user, its role and that role only, in every project of
    # the domain (inherited): install.rst's commands, the password typed
    # at its prompt
    doc_runner.doc_command('install.rst', 'openstack', 'role', 'create')
    doc_runner.doc_command('install.rst', 'openstack', 'user', 'create',
                           answers=(layout.PASSWORD, layout.PASSWORD))
    doc_runner.doc_command('install.rst', 'openstack', 'role', 'add')
    return connect()   # a new token: its catalogue has the endpoints


def neutron_warmup(conn):
    """List networks once, before nova lists any port.

    neutron 29 run as an API only (no RPC workers, no agents) answers its
    first ``GET /v2.0/ports`` with HTTP 500 (``Port`` has no attribute
    ``port_forwardings``): that relationship exists only once SQLAlchemy
    has configured the mappers, which any other query does first.
    """
    list(conn.network.networks())
    list(conn.network.ports())


def write_clouds_yaml():
    text = ('clouds:\n  %s:\n    auth:\n      auth_url: %s\n'
            '      username: admin\n      password: %s\n'
            '      project_name: admin\n      user_domain_name: Default\n'
            '      project_domain_name: Default\n    region_name: %s\n'
            '    identity_api_version: 3\n' % (
                CLOUD, layout.url('keystone', '/v3'), layout.PASSWORD,
                layout.REGION))
    with open(layout.path('etc', 'clouds.yaml'), 'w') as f:
        f.write(text)


def enable_vsmtio(nova_conf):
    """Add vsmtio's filter, weigher and driver with install.rst's commands.

    First the controller's ``enable`` on a copy of the plain nova.conf,
    and ``disable``, which must take back exactly what it wrote; then the
    compute host's ``enable --retention`` and ``provider-config`` on the
    cloud's nova.conf (one file: controller and compute host), as the
    devstack plugin does before nova-compute starts.
    """
    conf = '/etc/nova/nova.conf'
    with open(nova_conf) as f:
        plain = f.read()
    copy = nova_conf + '.controller'
    shutil.copy(nova_conf, copy)
    doc_runner.doc_command('install.rst', 'vsmtio-nova-conf', 'enable', conf,
                           **{conf: copy})
    with open(copy) as f:
        if f.read() == plain:
            raise procs.CloudError('install.rst\'s enable changed nothing')
    doc_runner.doc_command('install.rst', 'vsmtio-nova-conf', 'disable',
                           **{conf: copy})
    with open(copy) as f:
        after = f.read()
    os.unlink(copy)
    if after != plain:
        raise procs.CloudError(
            'install.rst\'s disable did not take back exactly what enable '
            'wrote:\n' + ''.join(difflib.unified_diff(
                plain.splitlines(True), after.splitlines(True))))
    doc_runner.doc_command('install.rst', 'vsmtio-nova-conf', 'enable',
                           '--retention', **{conf: nova_conf})
    doc_runner.doc_command('install.rst', 'vsmtio-nova-conf',
                           'provider-config', **{conf: nova_conf})
    # the compute host's key, printed on the controller: the one the
    # cloud gives nova-compute and the agent
    out = doc_runner.doc_command('install.rst', 'vsmtio-nova-conf', 'host-key',
                                 **{conf: nova_conf, 'HOST': layout.HOSTNAME})
    if configs.HOST_KEY not in out.split():
        raise procs.CloudError('install.rst\'s host-key printed %r, not the '
                               'key the host has' % out)


def nova_policy():
    """vsmtio's nova policy, by install.rst's command, beside nova.conf."""
    doc_runner.doc_command('install.rst', 'install', '-D', **{
        '/etc/nova/': layout.path('etc', 'nova') + '/'})


def retention_trait(conn):
    """Define the retention trait in placement, with install.rst's command.

    A flavor requiring a trait placement has never heard of gets a 400
    from placement, and nova 34 turns that into a TypeError for a
    dedicated-CPU flavor (its fallback PCPU query extends a list with the
    None of the failed query) instead of NoValidHost. Defined, the trait
    is simply on no host here, and such a flavor finds no valid host.
    """
    doc_runner.doc_command('install.rst', 'openstack', 'trait', 'create')


def trait_check(conn):
    """install.rst's check of a host's traits, on this cloud's node.

    Its placeholder NODE is the compute node's name; the node is nova's
    (``COMPUTE_NODE``) and, under TCG, has no retention trait.
    """
    every = list(conn.compute.hypervisors(details=True))
    nodes = [h.name for h in every
             if (getattr(h, 'service_details', None) or {}).get(
                 'host') == layout.HOSTNAME] or [h.name for h in every]
    out = doc_runner.doc_command('install.rst', 'openstack', 'resource',
                                 'provider', 'trait', 'list', NODE=nodes[0])
    if 'COMPUTE_NODE' not in out:
        raise procs.CloudError('install.rst\'s trait check shows no '
                               'COMPUTE_NODE trait on %s: %s'
                               % (nodes[0], out[-500:]))
    print('[cloud] %s: retention trait %s' % (
        nodes[0], 'present' if 'CUSTOM_VSMTIO_CONTEXT_RETENTION' in out
        else 'absent (TCG)'))


def images_and_flavors(conn):
    retention_trait(conn)
    ids = image.upload(conn)
    flavors = {}
    for name, (vcpus, ram, specs) in FLAVORS.items():
        flavor = conn.compute.find_flavor(name) or conn.compute.create_flavor(
            name=name, vcpus=vcpus, ram=ram, disk=1, is_public=True)
        if specs:
            conn.compute.create_flavor_extra_specs(flavor, specs)
        flavors[name] = flavor.id
    for name, (doc, leading, doc_name) in DOC_FLAVORS.items():
        doc_runner.doc_command(doc, *leading, **{doc_name: name})
        want = doc_commands.properties(doc_commands.one(doc, *leading))
        have = conn.compute.fetch_flavor_extra_specs(
            conn.compute.get_flavor(flavors[name])).extra_specs
        if have != want:
            raise procs.CloudError('%s: flavor %s has %s after %s\'s '
                                   'command, not %s' % (doc, name, have,
                                                        doc, want))
    with open(layout.path('etc', 'ids'), 'w') as f:
        for work, image_id in sorted(ids.items()):
            f.write('image_%s=%s\n' % (work, image_id))
        for name, fid in sorted(flavors.items()):
            f.write('flavor_%s=%s\n' % (name, fid))
    return ids, flavors


def ids():
    out = {}
    with open(layout.path('etc', 'ids')) as f:
        for line in f:
            key, _, value = line.strip().partition('=')
            out[key] = value
    return out


def smoke_boot(conn):
    """Boot one server, wait for ACTIVE, delete it: the cloud works."""
    known = ids()
    start = time.monotonic()
    server = conn.compute.create_server(
        name='vsmtio-smoke', image_id=known['image_idle'],
        flavor_id=known['flavor_vsmtio.tiny'], networks='none')
    server = conn.compute.wait_for_server(server, wait=600)
    print('[cloud] smoke server ACTIVE on %s in %.1f s' % (
        server.compute_host, time.monotonic() - start))
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=300)


def tempest_conf(conn):
    known = ids()
    workspace = layout.path('tempest')
    os.makedirs(os.path.join(workspace, 'etc'), exist_ok=True)
    tools = os.path.dirname(os.path.abspath(__file__))
    agent_cmd = '%s %s' % (os.path.join(layout.BIN, 'python'),
                           os.path.join(tools, 'cloud.py'))
    configs.write_ini(os.path.join(workspace, 'etc', 'tempest.conf'), {
        'DEFAULT': {'log_file': os.path.join(layout.LOG, 'tempest.log')},
        'auth': {'admin_username': 'admin',
                 'admin_password': layout.PASSWORD,
                 'admin_project_name': 'admin',
                 'admin_domain_name': 'Default',
                 'use_dynamic_credentials': 'true',
                 'tempest_roles': 'member'},
        'identity': {'uri_v3': layout.url('keystone', '/v3'),
                     'auth_version': 'v3', 'region': layout.REGION},
        'identity-feature-enabled': {'api_v2': 'false'},
        'compute': {'image_ref': known['image_idle'],
                    'image_ref_alt': known['image_io'],
                    'flavor_ref': known['flavor_vsmtio.tiny'],
                    'flavor_ref_alt': known['flavor_vsmtio.io'],
                    'build_timeout': 600, 'min_compute_nodes': 1,
                    'max_microversion': 'latest'},
        'compute-feature-enabled': {'console_output': 'true'},
        'validation': {'run_validation': 'false'},
        'service_available': {'nova': 'true', 'glance': 'true',
                              'neutron': 'false', 'cinder': 'false',
                              'swift': 'false', 'horizon': 'false',
                              'vsmtio': 'true'},
        # one machine: the compute host's commands run here, as root
        'vsmtio': {'host_command': 'sh -c',
                   'libvirt_uri': layout.LIBVIRT_URI,
                   'measured_class_secret': layout.MEASURED_CLASS_SECRET,
                   'agent_stop_command': agent_cmd + ' agent-stop',
                   'agent_start_command': agent_cmd + ' agent-start',
                   'node_stats_command': agent_cmd + ' node-stats --host '
                                                     '{host}',
                   'agent_checkpoint_path': layout.path(
                       'data', 'vsmtio', 'agent-checkpoint.json'),
                   'filter_min_classified_vcpus':
                       configs.FILTER_MIN_CLASSIFIED_VCPUS,
                   'image_io': known['image_io'],
                   'image_cpu': known['image_cpu'],
                   'publish_timeout': 180,
                   'fleet_zone': fleet.ZONE,
                   'watcher': 'true',
                   # the audit is retried until the model, rebuilt every
                   # MODEL_PERIOD seconds, has seen the departures
                   'watcher_audit_timeout': 20 * watcher.MODEL_PERIOD},
    })
    return workspace


def node_stats(host):
    """The JSON of ``compute_nodes.stats`` of ``host`` in the cell database.

    nova-compute's counted mix (``vsmtio_nova.compute.stats``): what the
    scheduler's mix filter reads of the host.
    """
    import pymysql

    conn = pymysql.connect(host=layout.HOST, port=layout.PORTS['mysql'],
                           user='vsmtio', password=layout.PASSWORD,
                           database='nova')
    try:
        with conn.cursor() as cur:
            cur.execute('SELECT stats FROM compute_nodes WHERE host = %s '
                        'AND deleted = 0', (host,))
            rows = cur.fetchall()
    finally:
        conn.close()
    if len(rows) != 1:
        raise procs.CloudError('%d compute nodes of host %s'
                               % (len(rows), host))
    return rows[0][0]


def run_tempest(regex, concurrency):
    """``tempest run`` in the cloud's workspace; its exit status.

    The workspace is made here (``.stestr.conf`` as ``tempest init``
    writes it) rather than by ``tempest init``, which would also register
    it in ``~/.tempest``.
    """
    import tempest
    workspace = layout.path('tempest')
    top = os.path.dirname(os.path.dirname(tempest.__file__))
    with open(os.path.join(workspace, '.stestr.conf'), 'w') as f:
        f.write('[DEFAULT]\ntest_path=%s\ntop_dir=%s\n' % (
            os.path.join(top, 'tempest', 'test_discover'), top))
    if not os.path.isdir(os.path.join(workspace, '.stestr')):
        procs.run(os.path.join(layout.BIN, 'stestr'), 'init', cwd=workspace,
                  quiet=True)
    env = dict(os.environ, TEMPEST_CONFIG_DIR=os.path.join(workspace, 'etc'))
    return subprocess.run([os.path.join(layout.BIN, 'tempest'), 'run',
                           '--regex', regex, '--concurrency',
                           str(concurrency)], cwd=workspace,
                          env=env).returncode


def destroy_domains():
    """Destroy and undefine every domain of the cloud's libvirtd."""
    sock = os.path.join(layout.LIBVIRT_SOCK_DIR, 'libvirt-sock')
    if not os.path.exists(sock):
        return
    try:
        import libvirt
        conn = libvirt.open(layout.LIBVIRT_URI)
    except Exception as exc:
        print('[cloud] libvirtd not reachable for cleanup: %s' % exc)
        return
    try:
        for dom in conn.listAllDomains():
            try:
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(0)
            except Exception as exc:
                print('[cloud] domain %s: %s' % (dom.name(), exc))
    finally:
        conn.close()
