"""Where the one-machine cloud keeps everything, and what it listens on.

One directory (``$VSMTIO_CLOUD_DIR``, default ``/var/tmp/vsmtio-cloud``)
holds every configuration file, database, log, pid file and guest disk,
so ``down`` can remove all of it. Every service binds 127.0.0.1 only.
"""

import os
import sys

ROOT = os.environ.get('VSMTIO_CLOUD_DIR', '/var/tmp/vsmtio-cloud')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: The Python environment the cloud runs in (every service, the agent and
#: tempest): the one this tool runs in.
BIN = os.path.dirname(sys.executable)
HOST = '127.0.0.1'
HOSTNAME = 'vsmtio-cloud'
#: The name the agent on the embedded simulated SMT host gives its
#: metrics: no compute host of nova's, and said to be simulated.
SIM_HOSTNAME = 'vsmtio-cloud-simulated'
REGION = 'RegionOne'
#: The libvirt host's availability zone: nova-api gives it to every
#: request that names none (the fake fleet is another zone, fleet.py).
DEFAULT_ZONE = 'vsmtio'
#: Local-only secrets: every service listens on the loopback address and
#: the whole cloud is removed by ``down``.
PASSWORD = 'vsmtio-cloud'
MEASURED_CLASS_SECRET = 'vsmtio-cloud-measured-class'

PORTS = {
    'mysql': 3306,
    'epmd': 4369,
    'rabbit': 5672,
    'rabbit-dist': 25672,
    'keystone': 5000,
    'glance': 9292,
    'placement': 8778,
    'neutron': 9696,
    'nova-api': 8774,
    'horizon': 8080,
    'agent-metrics': 9729,
    'agent-metrics-sim': 9730,
    'watcher-api': 9322,
    'prometheus': 9090,
    'aetos': 9095,
}


def path(*parts):
    return os.path.join(ROOT, *parts)


def url(service, suffix=''):
    return 'http://%s:%d%s' % (HOST, PORTS[service], suffix)


ETC = path('etc')
LOG = path('log')
RUN = path('run')
DATA = path('data')
LIBVIRT_SOCK_DIR = path('run', 'libvirt')
LIBVIRT_URI = 'qemu:///system?socket=%s/libvirt-sock' % LIBVIRT_SOCK_DIR
DB_SOCKET = path('run', 'mysqld.sock')
DATABASES = ('keystone', 'glance', 'placement', 'neutron', 'nova_api',
             'nova_cell0', 'nova', 'watcher')


def db_url(name):
    return 'mysql+pymysql://vsmtio:%s@%s:%d/%s?charset=utf8' % (
        PASSWORD, HOST, PORTS['mysql'], name)


def transport_url():
    return 'rabbit://guest:guest@%s:%d/' % (HOST, PORTS['rabbit'])
