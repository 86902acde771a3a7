"""The agent on the embedded simulated SMT host, and its part of the panel.

The cloud's compute host runs TCG guests on a machine without SMT, a PMU
or the patched kernel: its agent has nothing to keep or drop, so its page
of the panel shows what the panel shows where the product does not act.
A second agent runs the real loop and policy on the embedded simulated
SMT host (``configs.sim_agent``: a serving and a computing VM, at the
wall clock's pace), exporting to the same Prometheus, so the panel also shows a
host where the guard keeps and drops mechanisms for its reasons, VMs serve
I/O and computing VMs stand against their floor. It is started for the
``observe`` step only (``start``), after tempest, so tempest's minutes pay
nothing for it, and is stopped with everything else by ``down``.

``check`` asserts, from the pages Chromium read, that the simulated host
is marked as such wherever it is named and that its rows and charts hold
the figures its agent exported.
"""

import re

import exported
import layout
import observability
import procs
import services

#: The charts that must have data for the simulated host: each a line of
#: at least two points (the rest depend on what the guard kept then).
CHARTS = ('mix', 'timeout', 'kept', 'floors', 'served')

PAGE_JS = """
const out = {simulated: !!document.querySelector('.vsmtio-simulated'),
             charts: {}};
for (const box of document.querySelectorAll('.vsmtio-chart-box')) {
    const slug = box.id.replace('vsmtio-chart-', '');
    out.charts[slug] = {
        lines: [...box.querySelectorAll('polyline')].map(
            p => p.getAttribute('points').trim().split(/\\s+/).length),
        legend: [...box.querySelectorAll('.vsmtio-legend')].map(
            l => l.innerText.trim()),
        unit: [...box.querySelectorAll('svg text')].map(
            t => t.textContent).pop() || null,
    };
}
return out;
"""


def target():
    return '%s:%d' % (layout.HOST, layout.PORTS['agent-metrics-sim'])


def start():
    """Start the simulated host's agent unless it runs already."""
    if procs.pid_of('vsmtio-agent-sim') is None:
        services.sim_agent()


def wait_charted(timeout=300):
    """Until the panel's charts of the simulated host have two points.

    The same subqueries the panel sends (``vsmtio_dashboard.overview``):
    the guard's first verdicts come within a minute of the agent's start
    at the clock's pace, and a chart step is 15 s.
    """
    from vsmtio_dashboard import overview
    charts = {c.slug: c for c in overview.CHARTS}

    def charted():
        for slug in CHARTS:
            result = observability.query(
                overview.chart_query(charts[slug], target()))
            if not any(len(r['values']) >= 2 for r in result):
                return False
        return True

    procs.wait_for('the simulated host\'s charts (%s) with two points each'
                   % ', '.join(CHARTS), charted, timeout=timeout)


def page(driver):
    """``{simulated: banner shown, charts: {slug: lines, legend, unit}}``."""
    return driver.execute_script(PAGE_JS)


def _shown_number(text):
    """The first number of a cell (``2,240 requests/s``, ``0.967 under``)."""
    m = re.search(r'[0-9][0-9,]*(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?', text)
    if not m:
        raise AssertionError('no number in %r' % text)
    return float(m.group(0).replace(',', ''))


def _exported_reasons(agent, since):
    """``{domain: {reasons}}`` of the guard's verdicts ('' host-wide)."""
    out = {}
    for lbls in agent.labels('vsmtio_guard_verdict', since):
        out.setdefault(lbls.get('domain', ''), set()).add(lbls['reason'])
    return out


def check(agent, since, row, vms, page_seen, common):
    """The simulated host's row, instances and charts against its export.

    ``common(agent, since, row)`` checks what every host's row shows.
    """
    if row is None:
        raise AssertionError('the hosts table has no row for the '
                             'simulated host %s' % target())
    print('[cloud] panel row (simulated host): %s' % row)
    assert 'simulated' in row['Host'], row['Host']
    assert row['Mode'].startswith('simulated'), row['Mode']
    assert page_seen['simulated'], 'no "simulated host" banner on its page'
    common(agent, since, row)
    reasons = _exported_reasons(agent, since)
    if not reasons:
        raise AssertionError('the simulated host\'s agent exported no '
                             'guard verdict')
    mechanisms = {lbls['mechanism'] for lbls in
                  agent.labels('vsmtio_guard_verdict', since)}
    cell = row['Mechanisms kept (why)']
    for mechanism in mechanisms:
        assert '%s:' % mechanism in cell, (mechanism, cell)
    assert any(r in cell for rs in reasons.values() for r in rs), (
        cell, reasons)
    kept = agent.labels('vsmtio_guard_kept', since)
    if not kept:
        raise AssertionError('the guard on the simulated host kept nothing '
                             'while the page was read: no decision to show')
    # (a new search may drop it between the export and the scrape shown); a
    # per-VM mechanism is counted over VMs, a host-wide one said kept
    assert any('%s kept' % lbls['mechanism'] in
               vms.get(lbls['domain'], {}).get('Guard (why)', '')
               or re.search(r'%s: ([1-9]\d* of|kept \()' % re.escape(
                   lbls['mechanism']), cell)
               for lbls in kept), (kept, cell, vms)
    _check_instances(agent, since, vms, reasons)
    _check_charts(agent, since, page_seen['charts'])
    _check_status()


def _check_instances(agent, since, vms, reasons):
    """Each VM by name: the guard's reason, served I/O, its floor."""
    domains = {lbls['domain'] for lbls in
               agent.labels('vsmtio_vcpu_class', since)}
    if set(vms) != domains:
        raise AssertionError('the simulated host\'s page lists %s, its '
                             'agent exported %s' % (sorted(vms),
                                                    sorted(domains)))
    floors = agent.values('vsmtio_guard_floor', since, kind='computing')
    computing = 0
    for domain, vm in sorted(vms.items()):
        print('[cloud] panel instance %s (simulated): %s' % (domain, vm))
        assert vm['Instance'] == domain, vm
        if domain in reasons:
            assert any(r in vm['Guard (why)'] for r in reasons[domain]), (
                vm['Guard (why)'], reasons[domain])
        served = agent.values('vsmtio_vm_served_rate', since,
                              domain=domain)
        if served and max(served) > 0:
            assert vm['Served I/O'].endswith('requests/s'), vm
            exported.within(served, _shown_number(vm['Served I/O']),
                            'served I/O of %s' % domain, rel=0.01)
        ratios = agent.values('vsmtio_guard_vm_ratio', since, vm=domain,
                              kind='computing')
        cell = vm['As a computing VM (with / without)']
        if ratios:
            computing += 1
            exported.within(ratios, _shown_number(cell),
                            'ratio of %s' % domain, rel=0.001)
            floor = float(re.search(r'floor ([0-9.]+)', cell).group(1))
            exported.within(floors, floor, 'floor of %s' % domain, rel=0.01)
    if not computing:
        raise AssertionError('no computing VM against its floor on the '
                             'simulated host\'s page')


def _check_charts(agent, since, charts):
    """Every chart of :data:`CHARTS` drawn, VMs and the floor named."""
    for slug in CHARTS:
        lines = charts.get(slug, {}).get('lines') or []
        if not any(n >= 2 for n in lines):
            raise AssertionError('the simulated host\'s %s chart has no '
                                 'line of two points: %r'
                                 % (slug, charts.get(slug)))
    assert charts['timeout']['unit'] == 'µs', charts['timeout']
    assert charts['served']['unit'] == 'requests/s', charts['served']
    legends = {slug: ' | '.join(c['legend']) for slug, c in charts.items()}
    assert 'floor: ' in legends['floors'], legends['floors']
    for lbls in agent.labels('vsmtio_guard_vm_ratio', since,
                             kind='computing'):
        assert lbls['vm'] + ':' in legends['floors'], (lbls, legends)
    for lbls in agent.labels('vsmtio_vm_served_rate', since):
        assert lbls['domain'] + ':' in legends['served'], (lbls, legends)


def _check_status():
    """``vsmtio-agent status`` says the host is simulated, first line."""
    out = procs.run(services.bin_('vsmtio-agent'), '--config-file',
                    layout.path('etc', 'vsmtio', 'vsmtio-agent-sim.conf'),
                    'status', quiet=True)
    first = out.strip().splitlines()[0]
    assert first.startswith('mode simulated'), first
    print('[cloud] vsmtio-agent status (simulated host): %s' % first)
