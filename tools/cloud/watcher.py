"""Watcher in the one-machine cloud: API, decision engine and applier.

python-watcher from PyPI, in the cloud's Python environment, which also
holds vsmtio: the decision engine finds the ``vsmtio_workload_mix`` goal
and the ``vsmtio_mix_repair`` strategy through Watcher's entry points and
registers them at its start. The compute model is rebuilt every
:data:`MODEL_PERIOD` seconds (nova's notifications are off in this
cloud), so an audit sees departures that recent.
"""

import os

import catalogue
import configs
import layout
import procs
import services

PORT = layout.PORTS['watcher-api']
MODEL_PERIOD = 5
STRATEGY = 'vsmtio_mix_repair'


def conf():
    auth = configs.service_auth('watcher')
    return configs.write_ini(layout.path('etc', 'watcher', 'watcher.conf'), {
        'DEFAULT': dict(configs.common('watcher'),
                        transport_url=layout.transport_url()),
        'database': {'connection': layout.db_url('watcher')},
        'keystone_authtoken': configs.authtoken('watcher'),
        'watcher_clients_auth': auth,
        'nova': dict(auth, valid_interfaces='public'),
        'placement': dict(auth, valid_interfaces='public'),
        'oslo_messaging_notifications': {'driver': 'noop'},
        'oslo_concurrency': {
            'lock_path': layout.path('data', 'watcher', 'locks')},
        # cinder is not in this cloud: the compute model only
        'collector': {'collector_plugins': 'compute'},
        'watcher_cluster_data_model_collectors.compute': {
            'period': MODEL_PERIOD},
        # instances carry their flavor's extra specs (vsmtio:workload)
        'compute_model': {'enable_extended_attributes': 'true'},
        'watcher_strategies.vsmtio_mix_repair': {
            'measured_class_secret': layout.MEASURED_CLASS_SECRET},
    })


def identity(conn):
    catalogue.service_user(conn, 'watcher',
                           conn.identity.find_project('service'))
    catalogue.service(conn, 'watcher', 'infra-optim',
                      layout.url('watcher-api'))


def up(conn):
    identity(conn)
    path = conf()
    bin_ = layout.BIN
    procs.run(os.path.join(bin_, 'watcher-db-manage'), '--config-file', path,
              'upgrade', quiet=True)
    for name in ('watcher-decision-engine', 'watcher-applier'):
        procs.start(name, [os.path.join(bin_, name), '--config-file', path])
    # its eventlet server does not run on oslo.service's threading backend
    services.wsgi('watcher-api', 'watcher.wsgi.api:application', PORT, {},
                  argv=('--config-file', path))

    def registered():
        # the decision engine syncs goals and strategies as it starts
        return STRATEGY in conn.session.get(
            layout.url('watcher-api', '/v1/strategies')).text
    procs.wait_for('the vsmtio strategy in Watcher', registered, 180)
