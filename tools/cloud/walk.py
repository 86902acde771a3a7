"""The operator's walk: the docs' commands after bring-up, and the refusals.

Run after tempest (``cloud.py walk``, and in ``run``): every command of
``doc_commands.RUN`` that bring-up does not run (server boots, the
aggregate and reserved-I/O flavors, ``vsmtio-agent`` status and restore,
the metrics, Watcher's audit commands, the simulator's), as written; and
each refusal an operator meets, checked where the docs say to look:

* a retention flavor without dedicated CPUs: the server's fault, vsmtio's
  reason first, within nova's 255 characters;
* an aggregate that refuses I/O: nova's bare fault, the scheduler's INFO
  line naming the server and the host's numbers, and the Horizon panel's
  mix filter row of the host giving the same reason;
* ``vsmtio:workload=banana``: stored at the client's default
  microversion (then ignored, with a warning in the scheduler's log),
  refused at 2.86 by scheduler.rst's own ``flavor set``;
* a value the host refused: ``vsmtio-agent status`` and the metrics say
  so and show no timeout in force;
* a Watcher audit judging no host (fleet.rst's ``min_classified_vcpus=16``
  on hosts of 10 vCPUs): its plan's ``unjudged_hosts`` and the decision
  engine's warning; with ``enable_extended_attributes`` off: FAILED, and
  the decision engine's log names the option.
"""

import contextlib
import json
import os
import re
import tempfile
import time

import configs
import doc_commands
import doc_runner
import fleet
import horizon_panel
import layout
import procs
import resources
import services
import watcher

FAULT_MAX = 255
UUID = r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'


def log_text(*names):
    text = ''
    for name in names:
        try:
            with open(os.path.join(layout.LOG, name + '.log'),
                      errors='replace') as f:
                text += f.read()
        except OSError:
            pass
    return text


def fail(what, why):
    raise procs.CloudError('%s: %s' % (what, why))


class Walk:

    def __init__(self, conn, horizon=True):
        self.conn = conn
        self.horizon = horizon
        self.known = resources.ids()
        self.cleanups = []

    def flavor(self, name, specs=None):
        compute = self.conn.compute
        flavor = compute.create_flavor(name=name, vcpus=1, ram=128, disk=1,
                                       is_public=True)
        self.cleanups.append(lambda: compute.delete_flavor(flavor))
        if specs:
            compute.create_flavor_extra_specs(flavor, specs)
        return flavor

    def specs(self, name):
        compute = self.conn.compute
        return compute.fetch_flavor_extra_specs(
            compute.find_flavor(name)).extra_specs

    def boot(self, flavor, name, status='ACTIVE'):
        """scheduler.rst's ``server create``; the server once ``status``."""
        doc_runner.doc_command('scheduler.rst', 'openstack', 'server',
                               'create', **{
                                   'db.large': flavor,
                                   'IMAGE': self.known['image_idle'],
                                   'db-1': name})
        compute = self.conn.compute
        server = compute.find_server(name)
        self.cleanups.append(lambda: self._delete(server))
        failures = ['ACTIVE'] if status == 'ERROR' else ['ERROR']
        return compute.wait_for_server(server, status=status,
                                       failures=failures, wait=600)

    def _delete(self, server):
        self.conn.compute.delete_server(server, ignore_missing=True)
        self.conn.compute.wait_for_delete(server, wait=300)

    def fault(self, name):
        """scheduler.rst's ``server show``: its output."""
        return doc_runner.doc_command('scheduler.rst', 'openstack', 'server',
                                      'show', **{'db-1': name})

    def cleanup(self):
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception as exc:   # say it, and clean up the rest
                print('[cloud] walk cleanup: %s' % exc)


def doc_resources(walk):
    """scheduler.rst's aggregate and mist.rst's reserving flavors."""
    agg = walk.conn.compute.create_aggregate(name='io-farm')
    walk.cleanups.append(lambda: walk.conn.compute.delete_aggregate(agg))
    for prop in ('target_io_fraction=0.7', 'max_io_fraction=1.0',
                 'weight_multiplier=2.0'):
        doc_runner.doc_command('scheduler.rst', 'openstack', 'aggregate',
                               'set', '--property', 'vsmtio:' + prop)
    have = walk.conn.compute.get_aggregate(agg).metadata
    want = {'vsmtio:target_io_fraction': '0.7',
            'vsmtio:max_io_fraction': '1.0',
            'vsmtio:weight_multiplier': '2.0'}
    if {k: have.get(k) for k in want} != want:
        fail('scheduler.rst\'s aggregate set', have)
    for name in ('io.reserved', 'io.bw'):
        walk.flavor(name)
        doc_runner.doc_command('mist.rst', 'openstack', 'flavor', 'set', name)
        want = doc_commands.properties(doc_commands.one(
            'mist.rst', 'openstack', 'flavor', 'set', name))
        if walk.specs(name) != want:
            fail('mist.rst\'s flavor set', walk.specs(name))


def retention_refusal(walk):
    """Retention on shared CPUs: vsmtio's reason first in the fault."""
    walk.flavor('walk.retention-shared', {'vsmtio:context_retention': 'true'})
    server = walk.boot('walk.retention-shared', 'walk-retention', 'ERROR')
    message = (server.fault or {}).get('message', '')
    shown = walk.fault('walk-retention')
    want = 'No valid host was found. vsmtio: context retention refused: '
    if not message.startswith(want) or message[:70] not in shown:
        fail('retention on shared CPUs', 'fault %r; server show: %s'
             % (message, shown))
    for spec in ('hw:cpu_policy=dedicated',
                 'trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required'):
        if spec not in message:
            fail('retention on shared CPUs', '%s not in the fault %r'
                 % (spec, message))
    if len(message) > FAULT_MAX:
        fail('retention on shared CPUs', 'fault of %d characters'
             % len(message))
    print('[cloud] refusal in the fault: %s' % message)


def mix_refusal(walk):
    """An aggregate that refuses I/O: the scheduler's INFO line says why.

    One cpu server makes the host judged (nova.conf here judges a host
    from its first classified vCPU); with the aggregate's band [0, 0] an
    io server finds no host. The fault is nova's: a host filter has no way
    to give a reason (scheduler.rst, "When a boot is refused").
    """
    compute = walk.conn.compute
    agg = compute.create_aggregate(name='walk-no-io')
    compute.add_host_to_aggregate(agg, layout.HOSTNAME)
    walk.cleanups.append(lambda: compute.delete_aggregate(agg))
    walk.cleanups.append(
        lambda: compute.remove_host_from_aggregate(agg, layout.HOSTNAME))
    compute.set_aggregate_metadata(agg, {'vsmtio:min_io_fraction': '0',
                                         'vsmtio:max_io_fraction': '0'})
    walk.boot('vsmtio.cpu', 'walk-cpu')
    server = walk.boot('vsmtio.io', 'walk-io', 'ERROR')
    message = (server.fault or {}).get('message', '')
    shown = walk.fault('walk-io')
    if 'No valid host' not in message or message[:70] not in shown:
        fail('the aggregate refusing I/O', 'fault %r; server show: %s'
             % (message, shown))
    lines = [line for line in log_text('nova-scheduler').splitlines()
             if 'WorkloadMixFilter refused' in line and server.id in line]
    logged = lines and re.search(
        r'%s io:cpu 0:1 vCPUs, (I/O share 0\.000 -> 0\.500 outside '
        r'\[0\.000, 0\.000\], \S+ vCPUs free)' % re.escape(layout.HOSTNAME),
        lines[0])
    if len(lines) != 1 or ' INFO ' not in lines[0] or not logged:
        fail('the aggregate refusing I/O', 'nova-scheduler.log: %s'
             % (lines or 'no WorkloadMixFilter line for %s' % server.id))
    print('[cloud] refusal in the scheduler\'s log: %s'
          % lines[0].split(' INFO ')[-1])
    if walk.horizon:
        mix_panel(logged.group(1))


def mix_panel(logged):
    """The panel's mix filter row of the host: the log line's reason.

    With the aggregate and the cpu server still there, the row says that
    one more I/O server is refused from its smallest size, with the numbers
    the scheduler logged for the refused boot, and that a CPU server
    passes (dashboard.rst's mix filter table).
    """
    row = horizon_panel.mix_row(
        horizon_panel.mix_table('vsmtio-hosts-mix-refused.png'),
        layout.HOSTNAME)
    want = {'vCPUs the filter counts': 'io:cpu 0:1 vCPUs, I/O share 0.000',
            'I/O share band': '[0.000, 0.000] from aggregate walk-no-io',
            horizon_panel.MIX_VERDICT['io']: 'refused from 1 vCPU: '
                                             + logged}
    if {k: row.get(k) for k in want} != want or not row.get(
            horizon_panel.MIX_VERDICT['cpu'], '').startswith('passes'):
        fail('the panel on the aggregate refusing I/O', 'row %r, wanted %r'
             % (row, want))
    print('[cloud] refusal in the panel: %s'
          % row[horizon_panel.MIX_VERDICT['io']])


def bad_value(walk):
    """``vsmtio:workload=banana``: stored below 2.86, refused at 2.86."""
    leading = ('openstack', 'flavor', 'set', '--property',
               'vsmtio:workload=io')
    walk.flavor('walk.banana')
    walk.flavor('walk.banana-2.86')
    banana = {'vsmtio:workload=io': 'vsmtio:workload=banana'}
    out = doc_runner.doc_command('scheduler.rst', *leading, refused=True,
                                 **dict(banana, **{'db.large':
                                                   'walk.banana-2.86'}))
    if 'banana' not in out or walk.specs('walk.banana-2.86'):
        fail('banana at 2.86', 'output %r, extra specs %s'
             % (out, walk.specs('walk.banana-2.86')))
    print('[cloud] refused at 2.86: %s' % out.strip()[-300:])
    doc_runner.doc_command('scheduler.rst', *leading, variant=True, **dict(
        banana, **{'--os-compute-api-version 2.86 ': '',
                   'db.large': 'walk.banana'}))
    if walk.specs('walk.banana') != {'vsmtio:workload': 'banana'}:
        fail('banana at the default microversion', walk.specs('walk.banana'))
    walk.boot('walk.banana', 'walk-banana')
    want = ('Ignoring vsmtio:workload of flavor walk.banana: ')
    lines = [line for line in log_text('nova-scheduler',
                                       'nova-compute').splitlines()
             if want in line]
    if not lines:
        fail('banana at the default microversion',
             'no %r in nova-scheduler.log or nova-compute.log' % want)
    print('[cloud] stored below 2.86, then: %s'
          % lines[0].split(' WARNING ')[-1])


def agent_commands():
    """agent.rst's check, status, metrics; a refused value never in force.

    Then its ``restore``, with the agent stopped, and the agent again.
    """
    conf = {'/etc/vsmtio/vsmtio-agent.conf':
            layout.path('etc', 'vsmtio', 'vsmtio-agent.conf')}
    for doc in ('install.rst', 'agent.rst'):
        doc_runner.doc_command(doc, 'vsmtio-agent', 'check', **conf)
    out = doc_runner.doc_command('agent.rst', 'vsmtio-agent', 'status', **conf)
    with open(layout.path('run', 'vsmtio-agent-status.json')) as f:
        refused = json.load(f).get('refused') or {}
    metrics = doc_runner.doc_command('agent.rst', 'curl')
    if 'vsmtio_' not in metrics:
        fail('agent.rst\'s curl', metrics[:500])
    for mechanism, why in refused.items():
        if 'refused by the host (%s)' % why not in out:
            fail('vsmtio-agent status', '%s refused (%s), not said: %s'
                 % (mechanism, why, out))
        if not re.search(r'vsmtio_host_refused\{[^}]*mechanism="%s"'
                         % re.escape(mechanism), metrics):
            fail('the agent\'s metrics', '%s refused, not exported'
                 % mechanism)
    head = [line for line in out.splitlines() if line.startswith('mode ')]
    if len(head) != 1:
        fail('vsmtio-agent status', 'no head line: %s' % out)
    if 'retention' in refused and (
            'retention timeout refused by the host' not in head[0]
            or re.search(r'^vsmtio_retention_timeout_seconds[{ ]', metrics,
                         re.M)):
        fail('vsmtio-agent status', 'a refused timeout shown in force: %s'
             % out)
    print('[cloud] vsmtio-agent status: %s; refused by the host: %s'
          % (head[0], refused or 'nothing'))
    procs.stop('vsmtio-agent')
    out = doc_runner.doc_command('agent.rst', 'vsmtio-agent', 'restore',
                                 **conf)
    print('[cloud] vsmtio-agent restore: %s' % out.strip())
    services.agent()


@contextlib.contextmanager
def decision_engine(**options):
    """Watcher's decision engine with ``options`` in ``watcher.conf``."""
    def restart(extra):
        procs.stop('watcher-decision-engine')
        argv = [os.path.join(layout.BIN, 'watcher-decision-engine'),
                '--config-file', watcher.conf()]
        if extra:
            argv += ['--config-file', configs.write_ini(
                layout.path('etc', 'watcher', 'walk.conf'), extra)]
        procs.start('watcher-decision-engine', argv)
        # its compute model is built a period after it starts
        time.sleep(3 * watcher.MODEL_PERIOD)
    restart(options)
    try:
        yield
    finally:
        restart(None)


def audit(cwd):
    """fleet.rst's ``audit create``; the audit's UUID once it is done."""
    out = doc_runner.doc_command('fleet.rst', 'openstack', 'optimize',
                                 'audit', 'create', cwd=cwd)
    uuid = re.search(r'\|\s*UUID\s*\|\s*(%s)' % UUID, out).group(1)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        shown = doc_runner.doc_command('fleet.rst', 'openstack', 'optimize',
                                       'audit', 'show',
                                       **{'<audit uuid>': uuid})
        state = re.search(r'\|\s*State\s*\|\s*(\w+)', shown).group(1)
        if state in ('SUCCEEDED', 'FAILED', 'CANCELLED'):
            return uuid, state, shown
        time.sleep(3)
    fail('fleet.rst\'s audit', '%s not done after 300 s' % uuid)


def watcher_audits():
    """fleet.rst's commands, as written, on the fleet zone."""
    scope = [json.loads(body) for kind, body in doc_commands.blocks(
        doc_commands._read('fleet.rst'))
        if kind == '::' and body.startswith('[{"compute"')]
    if scope != [[{'compute': [{'availability_zones': [
            {'name': fleet.ZONE}]}]}]]:
        fail('fleet.rst\'s fleet-scope.json', scope)
    with tempfile.TemporaryDirectory() as cwd:
        with open(os.path.join(cwd, 'fleet-scope.json'), 'w') as f:
            json.dump(scope[0], f)
        doc_runner.doc_command('fleet.rst', 'openstack', 'optimize',
                               'audittemplate', 'create', cwd=cwd)
        before = len(log_text('watcher'))
        uuid, state, shown = audit(cwd)
        if state != 'SUCCEEDED':
            fail('fleet.rst\'s audit', shown)
        plans = doc_runner.doc_command(
            'fleet.rst', 'openstack', 'optimize', 'actionplan', 'list',
            **{'<audit uuid>': uuid})
        plan = re.search(r'\|\s*(%s)\s*\|\s*%s' % (UUID, uuid),
                         plans).group(1)
        shown = doc_runner.doc_command(
            'fleet.rst', 'openstack', 'optimize', 'actionplan', 'show',
            **{'<plan uuid>': plan})
        # an empty plan is SUCCEEDED at once, nothing to start
        if not re.search(r'\|\s*State\s*\|\s*SUCCEEDED', shown):
            fail('fleet.rst\'s actionplan show', shown)
        unjudged = re.search(r'unjudged_hosts.*?Value: (\d+)', shown,
                             re.S)
        hosts = len(fleet.HOSTS)
        if not unjudged or int(unjudged.group(1)) != hosts:
            fail('fleet.rst\'s actionplan show', 'unjudged_hosts is not %d:'
                 ' %s' % (hosts, shown))
        if 'no host holds 16 classified vCPUs' not in log_text(
                'watcher')[before:]:
            fail('fleet.rst\'s audit', 'no warning naming '
                 'min_classified_vcpus in watcher.log')
        doc_runner.doc_command('fleet.rst', 'openstack', 'optimize', 'action',
                               'list', **{'<plan uuid>': plan})
        print('[cloud] fleet.rst\'s audit %s: SUCCEEDED, unjudged_hosts %d '
              'of %d, and the warning' % (uuid, hosts, hosts))
        with decision_engine(compute_model={
                'enable_extended_attributes': 'false'}):
            before = len(log_text('watcher'))
            uuid, state, shown = audit(cwd)
            logged = log_text('watcher')[before:]
        if state != 'FAILED' or ('enable_extended_attributes = true in '
                                 'watcher.conf') not in logged:
            fail('an audit with extended attributes off', '%s: %s' % (
                state, shown))
        message = re.search(r'\|\s*Status Message\s*\|\s*(.*?)\s*\|',
                            shown)
        print('[cloud] with extended attributes off, audit %s FAILED; the '
              'decision engine\'s log names the option; audit show\'s '
              'status message: %s' % (uuid, message and message.group(1)))


def simulator():
    """simulator.rst's commands (no cloud needed: they are the docs')."""
    out = doc_runner.doc_command('simulator.rst', 'vsmtio-sim', 'list')
    if 'io_only' not in out:
        fail('vsmtio-sim list', out[:500])
    leading = ('vsmtio-sim', 'run', '--scenario', 'io_only')
    out = doc_runner.doc_command('simulator.rst', *leading)
    # the figures the docs show, but the wall-clock time
    shown = [line for line in doc_commands.output('simulator.rst', *leading)
             if not line.startswith('simulator: ')]
    got = [line for line in out.splitlines()
           if not line.startswith('simulator: ')]
    if got != shown:
        fail('simulator.rst\'s vsmtio-sim run', 'it prints:\n%s\nthe docs '
             'show:\n%s' % ('\n'.join(got), '\n'.join(shown)))


def walk(conn, horizon=True):
    """The walk; CloudError at the first step that fails.

    ``horizon``: whether the cloud runs Horizon, whose panel is then
    checked where the docs send an operator after a refused boot.
    """
    steps = Walk(conn, horizon)
    try:
        for label, step in (
                ('docs\' aggregate and reserving flavors',
                 lambda: doc_resources(steps)),
                ('retention on shared CPUs refused',
                 lambda: retention_refusal(steps)),
                ('an aggregate refusing I/O', lambda: mix_refusal(steps)),
                ('vsmtio:workload=banana', lambda: bad_value(steps)),
                ('agent.rst\'s commands', agent_commands),
                ('fleet.rst\'s Watcher audits', watcher_audits),
                ('simulator.rst\'s commands', simulator)):
            start = time.monotonic()
            step()
            steps.cleanup()
            print('[cloud] walk: %s: %.1f s'
                  % (label, time.monotonic() - start), flush=True)
    finally:
        steps.cleanup()
