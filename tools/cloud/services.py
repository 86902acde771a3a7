"""Bring-up steps of the one-machine cloud, one function per service.

Each step writes its service's configuration (:mod:`configs`), prepares
its database, starts its daemons (:mod:`procs`) and waits until they
answer. The order is the order of dependency: database and broker,
keystone, the services it catalogues, then nova's and the compute host.
"""

import os
import shutil
import subprocess

import configs
import doc_runner
import layout
import procs

MYSQLD = '/usr/sbin/mariadbd'
DEBIAN_PACKAGES = {
    '/usr/sbin/mariadbd': 'mariadb-server',
    '/usr/lib/rabbitmq/bin/rabbitmq-server': 'rabbitmq-server',
    '/usr/bin/epmd': 'erlang-base',
    '/usr/bin/chromium': 'chromium',
    '/usr/bin/chromedriver': 'chromium-driver',
    '/usr/bin/prometheus': 'prometheus',
    '/usr/bin/qemu-img': 'qemu-utils',
    '/usr/sbin/libvirtd': 'libvirt-daemon',
    '/usr/bin/virsh': 'libvirt-clients',
    '/usr/bin/qemu-system-x86_64': 'qemu-system-x86',
    '/bin/busybox': 'busybox-static',
    '/usr/bin/curl': 'curl',        # agent.rst's command
}


def bin_(name):
    return os.path.join(layout.BIN, name)


def ensure_packages():
    """Install the Debian packages the cloud runs on, where missing."""
    missing = sorted({p for f, p in DEBIAN_PACKAGES.items()
                      if not os.path.exists(f)}
                     | {'libvirt-daemon-driver-qemu'})
    missing = [p for p in missing if subprocess.run(
        ['dpkg-query', '-W', '-f=${Status}', p], capture_output=True,
        text=True).stdout.find('ok installed') < 0]
    if missing:
        env = {'DEBIAN_FRONTEND': 'noninteractive'}
        procs.run('apt-get', '-q', 'update', env=env, quiet=True)
        procs.run('apt-get', '-o', 'DPkg::Lock::Timeout=300', 'install',
                  '-y', '-q', '--no-install-recommends', *missing, env=env,
                  quiet=True)
    from vsmtio_agent.tests import system_user
    why = system_user.ensure()
    if why:
        raise procs.CloudError(why)


def check_ports_free():
    busy = [name for name, port in layout.PORTS.items()
            if procs.port_open(port)]
    if busy:
        raise procs.CloudError(
            'ports already in use on %s: %s (another cloud, or a service '
            'of the host); run "down" or free them first' % (
                layout.HOST, ', '.join('%s:%d' % (n, layout.PORTS[n])
                                       for n in busy)))


def mariadb():
    """Debian's MariaDB, private datadir, TCP on 127.0.0.1 only."""
    datadir = layout.path('data', 'mysql')
    if not os.path.isdir(os.path.join(datadir, 'mysql')):
        os.makedirs(datadir, exist_ok=True)
        procs.run('mariadb-install-db', '--no-defaults', '--user=root',
                  '--datadir=' + datadir, '--auth-root-authentication-method'
                  '=normal', '--skip-test-db', quiet=True)
    proc = procs.start('mysql', [
        MYSQLD, '--no-defaults', '--user=root', '--datadir=' + datadir,
        '--socket=' + layout.DB_SOCKET, '--bind-address=' + layout.HOST,
        '--port=%d' % layout.PORTS['mysql'], '--skip-name-resolve',
        '--pid-file=' + layout.path('run', 'mysqld.pid'),
        '--max-connections=1000', '--innodb-buffer-pool-size=64M',
        '--innodb-flush-log-at-trx-commit=0', '--character-set-server=utf8'])
    procs.wait_port('mysql', layout.PORTS['mysql'], proc)
    sql = ["CREATE USER IF NOT EXISTS 'vsmtio'@'127.0.0.1' IDENTIFIED BY "
           "'%s'" % layout.PASSWORD]
    for db in layout.DATABASES:
        sql.append('CREATE DATABASE IF NOT EXISTS %s' % db)
        sql.append("GRANT ALL ON %s.* TO 'vsmtio'@'127.0.0.1'" % db)
    procs.run('mariadb', '--no-defaults', '-uroot',
              '--socket=' + layout.DB_SOCKET, '-e', ';'.join(sql))


def rabbitmq():
    """Debian's RabbitMQ, its own node name, data dir and cookie."""
    base = layout.path('data', 'rabbitmq')
    os.makedirs(base, exist_ok=True)
    env = {
        'HOME': base,  # the Erlang cookie lives here
        'RABBITMQ_NODENAME': 'vsmtio@localhost',
        'RABBITMQ_NODE_IP_ADDRESS': layout.HOST,
        'RABBITMQ_NODE_PORT': str(layout.PORTS['rabbit']),
        'RABBITMQ_DIST_PORT': str(layout.PORTS['rabbit-dist']),
        'RABBITMQ_MNESIA_BASE': os.path.join(base, 'mnesia'),
        'RABBITMQ_LOG_BASE': os.path.join(base, 'log'),
        'RABBITMQ_PID_FILE': os.path.join(base, 'rabbit.pid'),
        'RABBITMQ_ENABLED_PLUGINS_FILE': os.path.join(base, 'plugins'),
        'RABBITMQ_CONFIG_FILE': os.path.join(base, 'rabbitmq'),
        'RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS':
            '-kernel inet_dist_use_interface {127,0,0,1}',
        'ERL_EPMD_ADDRESS': layout.HOST,
        'ERL_EPMD_PORT': str(layout.PORTS['epmd']),
    }
    with open(env['RABBITMQ_ENABLED_PLUGINS_FILE'], 'w') as f:
        f.write('[].\n')
    # epmd first, in the foreground, so that down stops it too
    epmd = procs.start('epmd', ['epmd', '-address', layout.HOST,
                                '-port', str(layout.PORTS['epmd'])],
                       env=env)
    procs.wait_port('epmd', layout.PORTS['epmd'], epmd)
    proc = procs.start('rabbitmq', ['/usr/lib/rabbitmq/bin/rabbitmq-server'],
                       env=env)
    procs.wait_port('rabbitmq', layout.PORTS['rabbit'], proc, timeout=180)


def wsgi(name, app, port, env, threads=4, argv=()):
    """A WSGI application under uWSGI (as devstack runs them).

    uWSGI, unlike gunicorn, leaves the application a ``sys.argv`` without
    server options, which neutron's oslo.config parsing needs; ``argv``
    is what the application finds after its name there.
    """
    proc = procs.start(name, [
        bin_('uwsgi'), '--http-socket', '%s:%d' % (layout.HOST, port),
        '--module', app, '--master', '--processes', '1',
        '--threads', str(threads), '--enable-threads', '--lazy-apps',
        '--die-on-term', '--need-app', '--buffer-size', '65535',
        '--http-timeout', '300', '--add-header', 'Connection: close',
        '--procname-prefix', name + ' ', '--worker-reload-mercy', '5']
        + (['--pyargv', ' '.join(argv)] if argv else []),
        env=env)
    procs.wait_http(name, port, proc, timeout=180)
    return proc


def keystone():
    conf = configs.keystone()
    args = ['--config-file', conf]
    manage = bin_('keystone-manage')
    procs.run(manage, *args, 'db_sync', quiet=True)
    for what in ('fernet_setup', 'credential_setup'):
        procs.run(manage, *args, what, '--keystone-user', 'root',
                  '--keystone-group', 'root', quiet=True)
    procs.run(manage, *args, 'bootstrap', '--bootstrap-password',
              layout.PASSWORD, '--bootstrap-admin-url',
              layout.url('keystone', '/v3/'), '--bootstrap-public-url',
              layout.url('keystone', '/v3/'), '--bootstrap-internal-url',
              layout.url('keystone', '/v3/'), '--bootstrap-region-id',
              layout.REGION, quiet=True)
    wsgi('keystone', 'keystone.wsgi.api:application',
         layout.PORTS['keystone'],
         {'OS_KEYSTONE_CONFIG_FILES': conf}, threads=8)


def glance():
    conf = configs.glance()
    etc = os.path.dirname(conf)
    shutil.copy(os.path.join(os.path.dirname(layout.BIN), 'etc', 'glance',
                             'glance-api-paste.ini'), etc)
    procs.run(bin_('glance-manage'), '--config-file', conf, 'db_sync',
              quiet=True)
    # the project's metadefs (what Horizon's metadata dialogs offer), by
    # install.rst's own command, in the source tree as it says
    doc_runner.doc_command('install.rst', 'glance-manage', **{
        'glance-manage': '%s --config-file %s' % (bin_('glance-manage'),
                                                  conf)})
    wsgi('glance-api', 'glance.wsgi.api:application',
         layout.PORTS['glance'], {'OS_GLANCE_CONFIG_DIR': etc})


def placement():
    conf = configs.placement()
    procs.run(bin_('placement-manage'), '--config-file', conf, 'db', 'sync',
              quiet=True)
    wsgi('placement', 'placement.wsgi.api:application',
         layout.PORTS['placement'],
         {'OS_PLACEMENT_CONFIG_DIR': os.path.dirname(conf)})


def neutron():
    conf = configs.neutron()
    etc = os.path.dirname(conf)
    shutil.copy(os.path.join(os.path.dirname(layout.BIN), 'etc', 'neutron',
                             'api-paste.ini'), etc)
    ml2 = os.path.join(etc, 'plugins', 'ml2', 'ml2_conf.ini')
    procs.run(bin_('neutron-db-manage'), '--config-file', conf,
              '--config-file', ml2, 'upgrade', 'heads', quiet=True)
    wsgi('neutron-api', 'neutron.wsgi.api:application',
         layout.PORTS['neutron'],
         {'OS_NEUTRON_CONFIG_DIR': etc}, threads=4)


def nova_databases(conf):
    manage = [bin_('nova-manage'), '--config-file', conf]
    procs.run(*manage, 'api_db', 'sync', quiet=True)
    procs.run(*manage, 'cell_v2', 'map_cell0', '--database_connection',
              layout.db_url('nova_cell0'), quiet=True)
    cells = procs.run(*manage, 'cell_v2', 'list_cells', quiet=True)
    if ' cell1 ' not in cells:
        procs.run(*manage, 'cell_v2', 'create_cell', '--name', 'cell1',
                  '--database_connection', layout.db_url('nova'),
                  '--transport-url', layout.transport_url(), quiet=True)
    procs.run(*manage, 'db', 'sync', quiet=True)


def nova_controller(conf):
    """nova-api (WSGI), nova-conductor, nova-scheduler."""
    etc = os.path.dirname(conf)
    wsgi('nova-api', 'nova.wsgi.osapi_compute:application',
         layout.PORTS['nova-api'], {'OS_NOVA_CONFIG_DIR': etc},
         threads=8)
    for svc in ('nova-conductor', 'nova-scheduler'):
        procs.start(svc, [bin_(svc), '--config-file', conf, '--log-file',
                          os.path.join(layout.LOG, svc + '.log')])


def libvirtd():
    """A libvirtd of the cloud's own, in a private mount namespace.

    Its /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/cache/libvirt
    and /var/log/libvirt are the cloud's directories, mounted over the
    host's in that namespace only, so it never meets another libvirtd's
    state (libvirt's QEMU driver locks /run/libvirt/qemu) nor changes the
    host's configuration. Its socket is in the cloud's run directory.
    """
    etc = configs.libvirt()
    mounts = ['mount -t tmpfs tmpfs /run/libvirt',
              'mount --bind %s /etc/libvirt' % etc]
    for sub in ('lib', 'cache', 'log'):
        d = layout.path('data', 'libvirt', sub)
        os.makedirs(d, exist_ok=True)
        mounts.append('mkdir -p /var/%s/libvirt && mount --bind %s '
                      '/var/%s/libvirt' % (sub, d, sub))
    script = ('set -e; mkdir -p /run/libvirt /etc/libvirt; %s; exec '
              'libvirtd -f /etc/libvirt/libvirtd.conf --pid-file '
              '/run/libvirt/libvirtd.pid' % '; '.join(mounts))
    proc = procs.start('libvirtd', ['unshare', '--mount', '--propagation',
                                    'private', 'sh', '-c', script])
    sock = os.path.join(layout.LIBVIRT_SOCK_DIR, 'libvirt-sock')
    procs.wait_for('libvirtd', lambda: os.path.exists(sock), 30, proc)


def nova_compute(conf):
    os.makedirs(layout.path('data', 'nova', 'instances'), exist_ok=True)
    proc = procs.start('nova-compute', [
        bin_('vsmtio-nova-compute'), '--config-file', conf, '--log-file',
        os.path.join(layout.LOG, 'nova-compute.log')])
    procs.wait_for('nova-compute registered', lambda: 'vsmtio-cloud' in
                   procs.run(bin_('nova-manage'), '--config-file', conf,
                             'cell_v2', 'discover_hosts', '--verbose',
                             quiet=True) or _host_mapped(conf), 240, proc)


def _host_mapped(conf):
    out = procs.run(bin_('nova-manage'), '--config-file', conf, 'cell_v2',
                    'list_hosts', quiet=True)
    return layout.HOSTNAME in out


def agent():
    conf = configs.agent()
    os.makedirs(layout.path('data', 'vsmtio'), exist_ok=True)
    proc = procs.start('vsmtio-agent', [bin_('vsmtio-agent'),
                                        '--config-file', conf])
    procs.wait_port('vsmtio-agent', layout.PORTS['agent-metrics'], proc)


def sim_agent():
    """The agent on the embedded simulated SMT host (configs.sim_agent)."""
    conf = configs.sim_agent()
    os.makedirs(layout.path('data', 'vsmtio'), exist_ok=True)
    proc = procs.start('vsmtio-agent-sim', [bin_('vsmtio-agent'),
                                            '--config-file', conf])
    procs.wait_port('vsmtio-agent-sim', layout.PORTS['agent-metrics-sim'],
                    proc)


HORIZON_SETTINGS = """# written by tools/cloud: Horizon of the vsmtio cloud
DEBUG = False
ALLOWED_HOSTS = ['127.0.0.1', 'localhost']
SECRET_KEY = 'vsmtio-cloud-local-only'
WEBROOT = '/'
OPENSTACK_HOST = '%(host)s'
OPENSTACK_KEYSTONE_URL = '%(keystone)s'
OPENSTACK_KEYSTONE_DEFAULT_ROLE = 'member'
STATIC_ROOT = '%(static)s'
COMPRESS_OFFLINE = True
CACHES = {'default': {
    'BACKEND': 'django.core.cache.backends.locmem.LocMemCache'}}
SESSION_ENGINE = 'django.contrib.sessions.backends.signed_cookies'
OPENSTACK_NEUTRON_NETWORK = {'enable_router': False, 'enable_quotas': False,
                             'enable_ipv6': False, 'enable_fip_topology_check':
                             False}
# the [vsmtio] options of the cloud's nova.conf the mix filter reads, as
# dashboard.rst says to mirror them (the others are nova's defaults)
VSMTIO_NOVA_OPTIONS = %(nova_options)r
"""


def horizon():
    """Horizon (openstack_dashboard from PyPI) under uWSGI.

    Its settings import ``local.local_settings``: the cloud's own
    ``etc/horizon/local/local_settings.py``, found through PYTHONPATH, so
    the installed package is not edited.
    """
    etc = layout.path('etc', 'horizon')
    static = layout.path('data', 'horizon', 'static')
    os.makedirs(os.path.join(etc, 'local'), exist_ok=True)
    os.makedirs(static, exist_ok=True)
    open(os.path.join(etc, 'local', '__init__.py'), 'w').close()
    with open(os.path.join(etc, 'local', 'local_settings.py'), 'w') as f:
        f.write(HORIZON_SETTINGS % {
            'host': layout.HOST, 'keystone': layout.url('keystone', '/v3'),
            'static': static, 'nova_options': {
                'filter_min_classified_vcpus':
                    configs.FILTER_MIN_CLASSIFIED_VCPUS}})
    env = {'PYTHONPATH': etc,
           'DJANGO_SETTINGS_MODULE': 'openstack_dashboard.settings'}
    for cmd in (('collectstatic', '--noinput'), ('compress', '--force')):
        procs.run(bin_('django-admin'), *cmd, env=env, quiet=True)
    proc = procs.start('horizon', [
        bin_('uwsgi'), '--http-socket', '%s:%d' % (
            layout.HOST, layout.PORTS['horizon']),
        '--module', 'openstack_dashboard.wsgi:application', '--master',
        '--processes', '1', '--threads', '4', '--enable-threads',
        '--die-on-term', '--need-app', '--buffer-size', '65535',
        '--static-map', '/static=' + static,
        '--add-header', 'Connection: close', '--worker-reload-mercy', '5'],
        env=env)
    procs.wait_http('horizon', layout.PORTS['horizon'], proc)
