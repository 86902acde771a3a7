"""The Grafana dashboard's queries against the cloud's Prometheus.

Each panel query of ``etc/grafana/vsmtio.json`` runs as Grafana would run
it with every host and instance selected (its template variables at their
``allValue``), and each must return data, unless the agent on this
machine exports none of the metrics it reads, which is said with the
metric's name (IPC needs a hardware PMU, absent here). The variables'
own ``label_values`` queries must find values too.
"""

import json
import os
import re
import time
import urllib.request

import layout
import observability

DASHBOARD = os.path.join(layout.REPO, 'etc', 'grafana', 'vsmtio.json')
METRIC = re.compile(r'\b(vsmtio_[a-z_]+)')


def _queries(dashboard):
    for panel in dashboard.get('panels', ()):
        for target in panel.get('targets', ()):
            if target.get('expr'):
                yield panel.get('title', '?'), target['expr']


def _expand(expr, variables):
    for name, value in variables.items():
        expr = expr.replace('${%s}' % name, value)
        expr = expr.replace('$' + name, value)
    return expr.replace('$__rate_interval', '1m').replace('$__interval',
                                                          '15s')


def _exported():
    """Names of the series the agent exports (with samples) right now."""
    from prometheus_client import parser
    url = layout.url('agent-metrics', '/metrics')
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {s.name for family in parser.text_string_to_metric_families(text)
            for s in family.samples}


def check():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    variables = {v['name']: v.get('allValue', '.*')
                 for v in dashboard.get('templating', {}).get('list', ())
                 if v.get('type') == 'query'}
    exported = _exported()
    failures, unmeasured, passed = [], [], 0
    for v in dashboard.get('templating', {}).get('list', ()):
        m = re.match(r'label_values\((.*), *(\w+)\)$',
                     v.get('definition', ''))
        if m:
            series = observability.query(_expand(m.group(1), variables))
            if not any(m.group(2) in s['metric'] for s in series):
                failures.append('variable %s: %s' % (v['name'],
                                                     v['definition']))
            else:
                passed += 1
    # a series the agent exported just now reaches Prometheus at its next
    # scrape: a query on series the agent exports may wait that long
    deadline = time.monotonic() + 2 * observability.SCRAPE_INTERVAL + 1
    for title, expr in _queries(dashboard):
        query = _expand(expr, variables)
        missing = {m for m in METRIC.findall(expr) if m not in exported}
        data = observability.query(query)
        while not data and not missing and time.monotonic() < deadline:
            time.sleep(1)
            data = observability.query(query)
        if data:
            passed += 1
            continue
        if missing:
            unmeasured.append('%s: the agent here exports no %s'
                              % (title, ', '.join(sorted(missing))))
        else:
            failures.append('%s: %s' % (title, query))
    for line in unmeasured:
        print('[cloud] grafana: not measured here: %s' % line)
    print('[cloud] grafana: %d queries returned data, %d not measured here, '
          '%d failed' % (passed, len(unmeasured), len(failures)))
    if failures:
        raise AssertionError('Grafana queries without data: %s'
                             % '; '.join(failures))
