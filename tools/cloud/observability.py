"""Prometheus scraping the agents, and Aetos in front of it.

OpenStack's telemetry reads Prometheus through Aetos, a keystone-aware
proxy: Watcher's Aetos datasource and python-observabilityclient find it
in the catalogue as ``metric-storage``, and so does vsmtio's Horizon
panel, with the signed-in user's token. Prometheus is Debian's; Aetos is
PyPI's, under uWSGI like the other APIs. Prometheus listens on 127.0.0.1
only and keeps its data under the cloud's directory, so ``down`` removes
it.
"""

import json
import os
import urllib.parse
import urllib.request

import catalogue
import configs
import layout
import procs
import services

PROMETHEUS = '/usr/bin/prometheus'
#: Seconds between scrapes: short, so that a test sees an agent's change
#: within seconds; the agent's period here is 1 s.
SCRAPE_INTERVAL = 5
JOB = 'vsmtio-agent'


def agent_targets():
    """Every agent metrics endpoint of the cloud (``agent-metrics*``)."""
    return sorted('%s:%d' % (layout.HOST, port)
                  for name, port in layout.PORTS.items()
                  if name.startswith('agent-metrics'))


def prometheus():
    etc = layout.path('etc', 'prometheus')
    os.makedirs(etc, exist_ok=True)
    conf = os.path.join(etc, 'prometheus.yml')
    # JSON is YAML: no YAML writer needed
    with open(conf, 'w') as f:
        json.dump({
            'global': {'scrape_interval': '%ds' % SCRAPE_INTERVAL,
                       'evaluation_interval': '%ds' % SCRAPE_INTERVAL},
            'scrape_configs': [{
                'job_name': JOB,
                'static_configs': [{'targets': agent_targets()}],
            }],
        }, f, indent=1)
    proc = procs.start('prometheus', [
        PROMETHEUS, '--config.file=' + conf,
        '--storage.tsdb.path=' + layout.path('data', 'prometheus'),
        '--web.listen-address=%s:%d' % (
            layout.HOST, layout.PORTS['prometheus']),
        '--log.level=warn'])
    procs.wait_http('prometheus', layout.PORTS['prometheus'], proc)


def aetos(conn):
    """Aetos (keystone auth) proxying Prometheus, in the catalogue."""
    catalogue.service_user(conn, 'aetos',
                           conn.identity.find_project('service'))
    catalogue.service(conn, 'aetos', 'metric-storage', layout.url('aetos'))
    # Aetos reads its options, and keystonemiddleware (loaded by Aetos's
    # paste pipeline with ``oslo_config_project = aetos``) reads its own,
    # from oslo.config's default files for the project, the first of
    # which are under $HOME: the cloud's directory is its HOME.
    home = layout.path('etc', 'aetos')
    configs.write_ini(os.path.join(home, '.aetos', 'aetos.conf'), {
        'DEFAULT': dict(configs.common('aetos'), auth_mode='keystone'),
        'prometheus': {'host': layout.HOST,
                       'port': layout.PORTS['prometheus']},
        'keystone_authtoken': configs.authtoken('aetos'),
    })
    services.wsgi('aetos', 'aetos.wsgi.api:application',
                  layout.PORTS['aetos'], {'HOME': home})


def query(promql):
    """An instant query straight to Prometheus (the cloud's own checks)."""
    url = '%s/api/v1/query?%s' % (layout.url('prometheus'),
                                  urllib.parse.urlencode({'query': promql}))
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.load(resp)
    if body.get('status') != 'success':
        raise procs.CloudError('Prometheus: %s: %s' % (promql, body))
    return body['data']['result']


def wait_scraped():
    """Until Prometheus has scraped the compute host's agent.

    Other agents (``agent-metrics-*`` ports) may start later; Prometheus
    scrapes them once they listen.
    """
    target = '%s:%d' % (layout.HOST, layout.PORTS['agent-metrics'])
    procs.wait_for('Prometheus scraping the agent at %s' % target,
                   lambda: query('up{job="%s", instance="%s"} == 1'
                                 % (JOB, target)), timeout=60)


def check_aetos(conn):
    """Check that keystone stands in front of the metrics.

    Aetos must answer the admin's token with Prometheus's data, and a
    query without a token with 401.
    """
    url = layout.url('aetos', '/api/v1/query')
    params = {'query': 'vsmtio_periods_total'}
    anonymous = conn.session.get(url, params=params, authenticated=False,
                                 raise_exc=False)
    if anonymous.status_code != 401:
        raise procs.CloudError('Aetos answered %d to a query without a '
                               'token' % anonymous.status_code)
    resp = conn.session.get(url, params=params, raise_exc=False)
    body = resp.json() if resp.status_code == 200 else {}
    if not body.get('data', {}).get('result'):
        raise procs.CloudError('Aetos answered the admin %d: %s; see %s'
                               % (resp.status_code, resp.text[:300],
                                  layout.path('log', 'aetos.log')))


def up(conn):
    prometheus()
    wait_scraped()
    aetos(conn)
    check_aetos(conn)
