"""``vsmtio-agent``: the per-host daemon and its operator commands.

``run`` (the default) runs the agent loop as an oslo.service service:
SIGTERM or SIGINT stops it and restores the host. ``check`` prints what the
host offers and what it lacks, as a doctor would. ``status`` prints the
running agent's per-core view (or, with no agent running, one observed
period in dry-run mode). Only ``run`` without ``--dry-run`` writes to the
host: it first recovers what a crashed agent left changed, then applies.
"""

import dataclasses
import importlib
import json
import os
import re
import sys
import threading
import time
import warnings

from oslo_config import cfg
from oslo_log import log as logging
import prettytable
from stevedore import driver as stevedore_driver

from vsmtio_agent.conf import CONF
from vsmtio_agent.conf import opts as conf_opts
from vsmtio_agent.drivers import base
from vsmtio_agent.host import checkpoint
from vsmtio_agent.host import procfs
from vsmtio_agent.policy import engine

LOG = logging.getLogger(__name__)

COMMANDS = ('run', 'check', 'status')

cli_opts = [
    cfg.StrOpt('host-driver',
               help='Override ``[vsmtio_agent] host_driver`` (e.g. '
                    '``simulated`` to run the real loop on the simulated '
                    'SMT host).'),
    cfg.BoolOpt('dry-run',
                default=False,
                help='Observe and log decisions without applying any.'),
    cfg.IntOpt('periods',
               min=1,
               help='Stop after this many periods (``run``; default: run '
                    'until signalled).'),
]


def _add_commands(subparsers):
    subparsers.add_parser('run', help='Run the agent (default).')
    subparsers.add_parser('check', help='Print what the host offers.')
    subparsers.add_parser('status', help='Print the per-core vCPU table.')


command_opt = cfg.SubCommandOpt('command', title='Commands',
                                handler=_add_commands)


def load_driver(conf):
    """Build the configured host driver.

    A name is looked up in the stevedore namespace
    ``vsmtio_agent.host_drivers``; ``package.module:Class`` loads that class
    directly (an out-of-tree driver, or a tree that is not pip-installed).
    """
    name = conf.vsmtio_agent.host_driver
    if ':' in name:
        module, _, cls = name.partition(':')
        try:
            driver_cls = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as exc:
            raise base.HostDriverError('cannot load host driver %r: %s'
                                       % (name, exc))
        return driver_cls(conf)
    try:
        mgr = stevedore_driver.DriverManager(
            'vsmtio_agent.host_drivers', name, invoke_on_load=True,
            invoke_args=(conf,))
    except Exception as exc:   # stevedore wraps import and lookup errors
        raise base.HostDriverError('cannot load host driver %r: %s'
                                   % (name, exc))
    return mgr.driver


def status_rows(agent):
    """The per-vCPU rows ``status`` prints, from the agent's last period."""
    decision = agent.last_decision
    if decision is None:
        return []
    pins = agent.driver.vcpu_pins()
    rows = []
    for ref, placement in sorted(decision.placements.items()):
        st = agent.last_stats.get(ref)
        # what the host has; the plan only where the split is applied
        pinned = pins.get(ref, placement.threads if decision.split
                          else ())
        rows.append({
            'core': placement.core_id, 'domain': ref.domain,
            'vcpu': ref.index, 'class': placement.role.value,
            'retention_rate': getattr(st, 'retention_rate', None),
            'utilisation': getattr(st, 'utilisation', None),
            'ipc': getattr(st, 'ipc', None),
            'i_cpu': getattr(st, 'i_cpu', None),
            'pinned': sorted(pinned)})
    return rows


def status_document(agent, mode):
    decision = agent.last_decision
    guard = agent.engine.guard
    return {'time': time.time(), 'pid': os.getpid(), 'mode': mode,
            'period': agent.opts.period, 'ticks': agent.ticks,
            'timeout_ns': decision.timeout_ns if decision else None,
            'dry_run': agent.opts.dry_run, 'vcpus': status_rows(agent),
            'mechanisms': sorted(agent.engine.kept),
            'verdicts': ([dataclasses.asdict(v) for v in guard.verdicts]
                         if guard is not None else None)}


def format_status(doc):
    """A per-core table of one status document."""
    def num(value, fmt='%.2f'):
        return 'n/a' if value is None else fmt % value

    table = prettytable.PrettyTable(
        ['core', 'domain', 'vcpu', 'class', 'retention', 'util', 'IPC',
         'I_cpu', 'pinned'])
    table.align = 'l'
    for row in sorted(doc['vcpus'], key=lambda r: (r['core'], r['domain'],
                                                   r['vcpu'])):
        table.add_row([row['core'], row['domain'], row['vcpu'], row['class'],
                       num(row['retention_rate'], '%.3f'),
                       num(row.get('utilisation')), num(row['ipc']),
                       num(row['i_cpu']),
                       ','.join(map(str, row['pinned']))])
    timeout = doc['timeout_ns']
    head = ('mode %s, period %.2f s, %d period(s), retention timeout %s%s'
            % (doc['mode'], doc['period'], doc['ticks'],
               'n/a' if timeout is None else '%d us' % (timeout // 1000),
               ', dry run' if doc.get('dry_run') else ''))
    lines = [head]
    if doc.get('verdicts') is None:
        lines.append('guard off: every mechanism applied')
    else:
        lines.append('mechanisms kept: %s' % (
            ', '.join(doc.get('mechanisms') or ()) or 'none'))
        for v in doc['verdicts']:
            lines.append('  guard: %s %s (%s)' % (
                v['mechanism'], 'kept' if v['kept'] else 'dropped',
                v['reason']))
    return '\n'.join(lines) + '\n' + table.get_string()


def _service_base():
    """oslo.service's ServiceBase on its threading backend (no eventlet)."""
    # futurist imports eventlet (unused here) only to warn it is deprecated.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    from oslo_service import backend
    if backend.get_backend_type() is None:
        backend.init_backend(backend.BackendType.THREADING)
    from oslo_service import service
    return service


class AgentService(_service_base().ServiceBase):
    """The agent loop as a long-running service with a clean stop."""

    def __init__(self, conf, periods=None):
        self.conf = conf
        self.periods = periods
        self.agent = None
        self.driver = None
        self.collector = None
        self.metrics_server = None
        self.publisher = None
        self._stop = threading.Event()
        self._thread = None
        self._done = threading.Event()
        self.mode = None

    def start(self):
        from vsmtio_agent import agent as agent_mod
        from vsmtio_agent import metrics
        from vsmtio_agent import publish
        opts = self.conf.vsmtio_agent
        # The libvirt driver holds each vCPU thread's procfs files open
        # between periods, within a share of this limit.
        procfs.raise_nofile_limit()
        self.driver = load_driver(self.conf)
        if not opts.dry_run:
            # The one place a crashed agent's leftovers are undone: before
            # the first period, never by a dry run (nor status or check).
            self.driver.recover()
        host = self.driver.describe()
        self.mode = host.mode
        LOG.info('vsmtio-agent: %s host (%s)%s', host.mode, host.reason,
                 ', dry run' if opts.dry_run else '')
        for item in host.missing:
            LOG.info('host lacks: %s', item)
        self.agent = agent_mod.Agent(self.conf, self.driver)
        self.collector = metrics.AgentCollector()
        if opts.metrics_port:
            try:
                _reg, self.metrics_server = metrics.serve(
                    self.collector, opts.metrics_bind_host, opts.metrics_port)
                LOG.info('metrics on http://%s:%d/metrics',
                         opts.metrics_bind_host, opts.metrics_port)
            except OSError as exc:
                LOG.warning('Metrics endpoint not started: %s', exc)
        self.publisher = publish.from_conf(self.conf)
        self._thread = threading.Thread(target=self._loop, name='vsmtio-loop',
                                        daemon=True)
        self._thread.start()

    def _loop(self):
        opts = self.conf.vsmtio_agent
        try:
            while not self._stop.is_set():
                if self.periods and self.agent.ticks >= self.periods:
                    break
                try:
                    self.agent.tick()
                except base.HostDriverError as exc:
                    LOG.warning('Period skipped: %s', exc)
                    self.collector.tick_failed()
                    self._stop.wait(opts.period)
                    continue
                except Exception:
                    LOG.exception('Period failed; the agent goes on')
                    self.collector.tick_failed()
                    self._stop.wait(opts.period)
                    continue
                if self.agent.last_decision is None:
                    continue
                self.collector.observe(self.agent, self.mode)
                doc = status_document(self.agent, self.mode)
                if self.publisher is not None:
                    self.publisher.observe(self.agent.last_stats,
                                           self.agent.last_decision)
                    doc['published'] = self.publisher.summary()
                try:
                    checkpoint.write_json_atomic(opts.status_path, doc,
                                                 durable=False)
                except OSError as exc:
                    LOG.debug('status file not written: %s', exc)
        finally:
            self._done.set()

    def wait(self):
        self._done.wait()

    def stop(self, graceful=False):
        """Stop ticking, then put the host back as it was."""
        self._stop.set()
        if self.driver is not None:
            self.driver.interrupt()
        if self._thread is not None:
            self._thread.join()
        if self.publisher is not None:
            self.publisher.stop()
        if self.agent is not None:
            self.agent.stop()
            LOG.info('vsmtio-agent stopped; host restored')
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server = None
        try:
            os.unlink(self.conf.vsmtio_agent.status_path)
        except OSError:
            pass

    def reset(self):
        pass


def _run(conf):
    """Run under oslo.service until SIGTERM/SIGINT, which restore the host.

    The launcher (threading backend) runs the service in one worker
    process and relays the signals to it; the worker's ``stop`` restores
    what that same process changed.
    """
    try:
        service = _service_base()
    except ImportError as exc:
        LOG.error('oslo.service\'s threading backend is unavailable (%s): '
                  'install oslo.service[threading]', exc)
        return 1
    svc = AgentService(conf, periods=conf.periods)
    if conf.periods:
        # A bounded run (tests, a first look) needs no supervisor.
        try:
            svc.start()
            svc.wait()
        except base.HostDriverError as exc:
            LOG.error('%s', exc)
            return 1
        finally:
            svc.stop()
        return 0
    launcher = service.ServiceLauncher(conf, restart_method='mutate')
    launcher.launch_service(svc)
    return launcher.wait()


def _check(conf):
    try:
        drv = load_driver(conf)
    except base.HostDriverError as exc:
        print('error: %s' % exc)
        return 1
    try:
        host = drv.describe()
        print('mode: %s' % host.mode)
        print('why:  %s' % host.reason)
        try:
            topo = drv.topology()
            print('cores (hyperthread siblings):')
            for core in topo.cores:
                print('  core %-3d %s' % (core.core_id,
                                          ','.join(map(str, core.threads))))
        except (OSError, ValueError, base.HostDriverError) as exc:
            print('topology: error: %s' % exc)
        print('offers:')
        for item in host.capabilities:
            print('  + %s' % item)
        print('missing:')
        for item in host.missing or ('nothing',):
            print('  - %s' % item)
    finally:
        drv.close()
    return 0


def _status(conf):
    opts = conf.vsmtio_agent
    try:
        with open(opts.status_path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        doc = None
    except ValueError as exc:
        print('error: %s is not a status document: %s'
              % (opts.status_path, exc))
        return 1
    if doc is not None and _alive(doc.get('pid')):
        print(format_status(doc))
        return 0
    print('no running agent (%s absent or stale); observing one period '
          'in dry-run mode:' % opts.status_path)
    from vsmtio_agent import agent as agent_mod
    conf.set_override('dry_run', True, group='vsmtio_agent')
    try:
        drv = load_driver(conf)
        agent = agent_mod.Agent(conf, drv)
        agent.tick()
        agent.tick()
    except base.HostDriverError as exc:
        print('error: %s' % exc)
        return 1
    try:
        print(format_status(status_document(agent, drv.describe().mode)))
    finally:
        drv.close()
    return 0


def _alive(pid):
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parse_args(argv, conf=CONF):
    """Parse ``argv`` into ``conf``; ``run`` when no command is given."""
    # The command goes last so options may come before or after it.
    commands = [a for a in argv if a in COMMANDS] or ['run']
    argv = [a for a in argv if a not in COMMANDS] + commands[-1:]
    conf.register_cli_opts(cli_opts)
    conf.register_cli_opt(command_opt)
    logging.register_options(conf)
    conf(argv, project='vsmtio', prog='vsmtio-agent')
    if conf.host_driver:
        conf.set_override('host_driver', conf.host_driver,
                          group='vsmtio_agent')
    if conf.dry_run:
        conf.set_override('dry_run', True, group='vsmtio_agent')
    return conf


def validate_conf(conf):
    """Read every vsmtio option now, so a bad value stops the start.

    oslo.config checks a value only when it is first read, and the agent
    reads some options only deep inside a period: without this a typo in
    the file would end a running agent with a traceback. Raises
    ``cfg.Error`` or ``ValueError`` with a message naming the option.
    """
    for group, opts in conf_opts.list_opts():
        for opt in opts:
            try:
                getattr(getattr(conf, group.name), opt.dest)
            except cfg.NoSuchOptError:
                # listed for the sample file, registered by keystoneauth1
                # only when it loads the configured auth plugin
                continue
            except cfg.Error as exc:
                # oslo's message embeds a LocationInfo repr; keep the file
                # and the reason (get_location would raise this again).
                text = str(exc)
                source = re.search(r"detail='([^']*)'", text)
                raise ValueError('[%s] %s%s: %s' % (
                    group.name, opt.dest,
                    ' in %s' % source.group(1) if source else '',
                    text.rpartition('is not valid: ')[2]))
    opts = conf.vsmtio_agent
    if opts.min_timeout_us > opts.max_timeout_us:
        raise ValueError('[vsmtio_agent] min_timeout_us (%d) is above '
                         'max_timeout_us (%d)'
                         % (opts.min_timeout_us, opts.max_timeout_us))
    engine.Params.from_conf(conf)


def main(argv=None):
    try:
        conf = parse_args(sys.argv[1:] if argv is None else argv)
        validate_conf(conf)
    except (cfg.Error, ValueError) as exc:
        print('vsmtio-agent: error: %s' % exc, file=sys.stderr)
        return 2
    logging.setup(conf, 'vsmtio')
    command = conf.command.name
    if command == 'check':
        return _check(conf)
    if command == 'status':
        return _status(conf)
    return _run(conf)


if __name__ == '__main__':
    sys.exit(main())
