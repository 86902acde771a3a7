"""vsmtio's Horizon panel in the cloud's Horizon, and its browser test.

``install`` enables the plugin as an operator does, by dashboard.rst's
command: its ``enabled`` files copied into Horizon's
``openstack_dashboard/local/enabled`` (here, the cloud's Python
environment), before Horizon collects its static files.

``check`` boots one I/O and one CPU flavored server, opens the panel in
headless Chromium, reads what the hosts table and the host pages show, and
compares it with what the agents' own ``/metrics`` exported while
Prometheus could have scraped it: the panel goes agent -> Prometheus ->
Aetos -> Horizon, so its figure must be one the agent exported in the last
scrape intervals before the page was read. Two agents: the compute host's
(libvirt, TCG guests: the guard has nothing to judge) and the one on the
embedded simulated SMT host (``simulated_host``), where the guard keeps
and drops mechanisms for reasons, VMs serve I/O and computing VMs stand
against their floor; the check asserts those rows and charts have the
agent's data and that the host is marked simulated wherever it is named.
The page's second table, nova's mix filter by compute host, must count the
compute host's vCPUs as nova-compute's saved stats do and refuse neither
class's smallest server there (the walk's refused boot checks the table
where the filter refuses: ``walk.mix_refusal``). It saves a screenshot of
the page and of each host's page (``VSMTIO_SCREENSHOTS``, default outside
the repository).
"""

import contextlib
import json
import os
import re
import time

import doc_runner
import exported
import layout
import observability
import procs
import resources
import simulated_host

SCREENSHOTS = os.environ.get('VSMTIO_SCREENSHOTS',
                             '/var/tmp/vsmtio-screenshots')
INDEX = '/admin/vsmtio_hosts/'


def install():
    """The panel's enabled files in Horizon's, by dashboard.rst's command."""
    import openstack_dashboard.local.enabled as local_enabled
    doc_runner.doc_command('dashboard.rst', 'cp', **{
        '/path/to/openstack_dashboard/local/enabled/':
            os.path.dirname(local_enabled.__file__) + '/'})


def _retention_timeout(agent, since, cell):
    """The timeout cell: the exported timeout, or the host's refusal.

    A timeout the host refused is never shown as in effect: the agent
    then exports no timeout and says why (``vsmtio_host_refused``), and
    the panel must say the same.
    """
    refused = {dict(k[1]).get('reason') for _t, v in agent.samples
               for k, val in v.items()
               if k[0] == 'vsmtio_host_refused' and val
               and dict(k[1]).get('mechanism') == 'retention'}
    if refused:
        assert cell.startswith('refused by the host') and any(
            r and r in cell for r in refused), (cell, refused)
        return
    exported.within(agent.values('vsmtio_retention_timeout_seconds', since),
                    _seconds(cell), 'Retention timeout', rel=0.005)


def _seconds(text):
    """The panel's duration text (``200 µs``, ``1.5 ms``, ``2 s``) in s."""
    m = re.match(r'([0-9.e+-]+) (µs|ms|s)\b', text)
    if not m:
        raise AssertionError('not a duration: %r' % text)
    return float(m.group(1)) * {'µs': 1e-6, 'ms': 1e-3, 's': 1}[m.group(2)]


TABLE_JS = """
const table = document.getElementById(arguments[0]);
const heads = [...table.querySelectorAll('thead tr:last-of-type th')]
    .map(t => t.innerText.trim());
const out = {};
for (const tr of table.querySelectorAll('tbody tr[data-object-id]')) {
    const cells = [...tr.querySelectorAll('td')]
        .map(t => t.innerText.trim());
    const row = {};
    heads.forEach((h, i) => row[h] = cells[i]);
    out[tr.dataset.objectId] = row;
}
return out;
"""


def _table(driver, table_id):
    """``{row id: {column header: cell text}}`` of a Horizon table."""
    return driver.execute_script(TABLE_JS, table_id)


#: The mix filter's table's column of one more server of each class.
MIX_VERDICT = {'io': 'One more I/O server', 'cpu': 'One more CPU server'}


def mix_row(rows, host):
    """The mix filter's table's row of nova's ``host`` (``rows``: ``_table``).

    A row is named by its host, followed by its node where nova names the
    node otherwise.
    """
    for row in rows.values():
        if row['Compute host'].split(' (node ')[0] == host:
            return row
    raise AssertionError('the mix filter\'s table has no row for %s: %r'
                         % (host, rows))


def mix_table(png=None):
    """The mix filter's table as the admin sees it now; saved to ``png``."""
    import browser
    with browser.signed_in() as driver:
        browser.open_page(driver, INDEX, 'table#vsmtio_mix')
        rows = _table(driver, 'vsmtio_mix')
        if png:
            os.makedirs(SCREENSHOTS, exist_ok=True)
            browser.full_page_png(driver, os.path.join(SCREENSHOTS, png))
    return rows


def _check_mix(rows):
    """The compute host's mix as the filter counts it; nothing refused.

    The filter reads the mix nova-compute saved in the node's stats
    (``vsmtio_nova.compute.stats``): the panel, which counts the declared
    classes of the servers nova lists, must count the same, and with the
    observed servers on a host within its band neither class's smallest
    server is refused there.
    """
    row = mix_row(rows, layout.HOSTNAME)
    print('[cloud] panel mix filter row: %s' % row)
    stats = json.loads(resources.node_stats(layout.HOSTNAME))
    counted = 'io:cpu %s:%s vCPUs' % (stats.get('vsmtio_io_vcpus'),
                                      stats.get('vsmtio_cpu_vcpus'))
    assert row['vCPUs the filter counts'].startswith(counted + ','), (
        row, counted)
    assert row['I/O share band'] == '[0.100, 0.900] from the options', row
    for column in MIX_VERDICT.values():
        assert row[column].startswith('passes'), (column, row)


def _boot(conn):
    known = resources.ids()
    servers = []
    for flavor in ('vsmtio.io', 'vsmtio.cpu'):
        servers.append(conn.compute.create_server(
            name='vsmtio-panel-%s' % flavor.split('.')[1],
            image_id=known['image_idle'],
            flavor_id=known['flavor_%s' % flavor], networks='none'))
    return [conn.compute.wait_for_server(s, wait=600) for s in servers]


@contextlib.contextmanager
def booted(conn):
    """Two servers (flavors vsmtio.io and vsmtio.cpu) for the observe step.

    Yields them once Prometheus holds their vCPU classes, and deletes them
    after: the panel and the Grafana dashboard are checked while they run
    (a deleted server's series go stale at the next scrape).
    """
    servers = _boot(conn)
    try:
        procs.wait_for('Prometheus holding both servers\' vCPU classes',
                       lambda: {r['metric']['domain'] for r in
                                observability.query('vsmtio_vcpu_class')}
                       >= {s.id for s in servers}, timeout=120)
        yield servers
    finally:
        for s in servers:
            conn.compute.delete_server(s)
        for s in servers:
            conn.compute.wait_for_delete(s, wait=300)


def check(servers):
    """Assert the panel against both agents' export; save screenshots.

    ``servers`` are :func:`booted`'s, running.
    """
    import browser
    target = '%s:%d' % (layout.HOST, layout.PORTS['agent-metrics'])
    sim_target = simulated_host.target()
    # the host page's charts (15 s steps) have a point counting them
    mix = '(sum(vsmtio_host_vcpus{instance="%s"}))[1m:15s]' % target
    procs.wait_for('the mix chart counting both servers', lambda: float(
        observability.query(mix)[0]['values'][-1][1]) >= len(servers),
        timeout=60)
    simulated_host.wait_charted()
    os.makedirs(SCREENSHOTS, exist_ok=True)
    with exported.AgentExport() as agent, \
            exported.AgentExport('agent-metrics-sim') as sim_agent:
        since = time.monotonic()
        # Prometheus shows what it scraped up to two intervals ago
        time.sleep(2 * observability.SCRAPE_INTERVAL + 1)
        with browser.signed_in() as driver:
            browser.open_page(driver, INDEX, 'table#vsmtio_hosts')
            hosts = _table(driver, 'vsmtio_hosts')
            mix = _table(driver, 'vsmtio_mix')
            pngs = [browser.full_page_png(
                driver, os.path.join(SCREENSHOTS, 'vsmtio-hosts.png'))]
            browser.open_page(driver, INDEX + target + '/',
                              'table#vsmtio_instances')
            vms = _table(driver, 'vsmtio_instances')
            real_page = simulated_host.page(driver)
            pngs.append(browser.full_page_png(
                driver, os.path.join(SCREENSHOTS, 'vsmtio-host.png')))
            browser.open_page(driver, INDEX + sim_target + '/',
                              'table#vsmtio_instances')
            sim_vms = _table(driver, 'vsmtio_instances')
            sim_page = simulated_host.page(driver)
            pngs.append(browser.full_page_png(
                driver, os.path.join(SCREENSHOTS,
                                     'vsmtio-host-simulated.png')))
    _check_real_host(agent, since, hosts.get(target), hosts, vms, servers)
    _check_mix(mix)
    assert not real_page['simulated'], real_page
    assert 'simulated' not in hosts[target]['Host'], hosts[target]
    simulated_host.check(sim_agent, since, hosts.get(sim_target), sim_vms,
                         sim_page, _common_row_checks)
    print('[cloud] panel matches both agents\' export; screenshots: %s'
          % ', '.join(pngs))


def _common_row_checks(agent, since, row):
    """What every host's row shows: mode, vCPUs, timeout, health."""
    mode = [dict(k[1])['mode'] for _t, v in agent.samples
            for k, val in v.items()
            if k[0] == 'vsmtio_host_mode' and val]
    assert row['Mode'].split()[0] in mode, (row['Mode'], set(mode))
    for klass, header in (('io', 'I/O vCPUs'), ('cpu', 'CPU vCPUs')):
        exported.within(agent.values('vsmtio_host_vcpus', since,
                                     **{'class': klass}),
                        float(row[header]), header)
    _retention_timeout(agent, since, row['Retention timeout'])
    periods = int(re.match(r'period (\d+)', row['Last period']).group(1))
    exported.within(agent.values('vsmtio_periods_total', since), periods,
                    'Last period')
    assert row['Agent'].startswith('running'), row['Agent']


def _check_real_host(agent, since, row, hosts, vms, servers):
    """The compute host's row and its servers, by name and class."""
    if row is None:
        raise AssertionError('the hosts table has no row for the compute '
                             'host: %r' % hosts)
    print('[cloud] panel row: %s' % row)
    _common_row_checks(agent, since, row)
    classes = agent.classes(since)
    for server in servers:
        vm = vms.get(server.id)
        if vm is None:
            raise AssertionError('the host page has no row for %s: %r'
                                 % (server.name, vms))
        print('[cloud] panel instance %s: %s' % (server.name, vm))
        assert vm['Instance'] == server.name, vm
        assert vm['Measured class'] in classes[server.id], (
            server.name, vm['Measured class'], classes[server.id])
