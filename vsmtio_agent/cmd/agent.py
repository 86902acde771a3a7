"""``vsmtio-agent``: the per-host daemon and its operator commands.

``run`` (the default) runs the agent loop as an oslo.service service:
SIGTERM or SIGINT stops it and restores the host. ``check`` prints what the
host offers and what it lacks, as a doctor would. ``status`` prints the
running agent's per-core view (or, with no agent running, one observed
period in dry-run mode). ``restore`` puts back what a stopped or killed
agent left changed, without the policy. Only ``run`` without
``--dry-run`` and ``restore`` write to the host: ``run`` first recovers
what a crashed agent left changed, then applies.

Every command checks the whole configuration first and needs a host driver
named (no default); whatever is wrong with the configuration, its files,
the log or the status file is one line on stderr and exit status 2.
"""

import argparse
import contextlib
import difflib
import importlib.metadata
import io
import math
import os
import sys
import threading
import traceback
import warnings

from oslo_config import cfg
from oslo_log import log as logging
from stevedore import driver as stevedore_driver

from vsmtio_agent.actuators import checkpoint
from vsmtio_agent import cmd
from vsmtio_agent.conf import CONF
from vsmtio_agent.conf import opts as conf_opts
from vsmtio_agent.drivers import base
from vsmtio_agent.linux import procfs
from vsmtio_agent.policy import engine
from vsmtio_agent import status

LOG = logging.getLogger(__name__)

COMMANDS = (('run', 'Run the agent (default).'),
            ('check', 'Print what the host offers.'),
            ('status', 'Print the per-core vCPU table.'),
            ('restore', 'Put back everything a stopped or killed agent '
                        'left changed, without running the policy.'))

cli_opts = [
    cfg.StrOpt('host-driver',
               help='Override ``[vsmtio_agent] host_driver``: ``libvirt``, '
                    'or ``simulated`` to run the real loop on the '
                    'simulated SMT host.'),
    cfg.BoolOpt('dry-run',
                default=False,
                help='Observe and log decisions without applying any.'),
    cfg.IntOpt('periods',
               min=1,
               help='Stop after this many periods (``run``; default: run '
                    'until signalled).'),
]


def _add_commands(subparsers):
    """The sub-commands; ``run`` when none is given.

    The command-line options are accepted after the command too
    (``vsmtio-agent status --host-driver libvirt``): each sub-command's
    parser carries the same options, and one given there overrides one
    given before the command.
    """
    subparsers.required = False
    subparsers.default = 'run'
    for name, helptext in COMMANDS:
        parser = subparsers.add_parser(name, help=helptext)
        for opt in cli_opts:
            cmd.add_argument(parser, opt, default=argparse.SUPPRESS)


command_opt = cfg.SubCommandOpt('command', title='Commands',
                                handler=_add_commands)


HOST_DRIVERS = 'vsmtio_agent.host_drivers'


def host_driver_names():
    """The names a host driver can have: its entry point namespace's."""
    return sorted({ep.name for ep in
                   importlib.metadata.entry_points(group=HOST_DRIVERS)})


def driver_class(conf):
    """The configured host driver's class, by its name in ``HOST_DRIVERS``.

    Only by name: a module path would let the configuration import and
    call anything, and the daemon runs as root.
    """
    name = conf.vsmtio_agent.host_driver
    try:
        mgr = stevedore_driver.DriverManager(HOST_DRIVERS, name)
    except Exception as exc:   # stevedore wraps import and lookup errors
        raise base.HostDriverError('cannot load host driver %r: %s'
                                   % (name, exc))
    return mgr.driver


def load_driver(conf):
    """Build the configured host driver (see :func:`driver_class`)."""
    return driver_class(conf)(conf)


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
        self.collector = metrics.AgentCollector(
            metrics.host_name(opts), floors={'computing': opts.guard_cpu_min,
                                             'serving': opts.guard_io_min})
        if opts.metrics_port:
            self._serve_metrics(metrics, opts)
        self.publisher = publish.from_conf(self.conf)
        self._thread = threading.Thread(target=self._loop, name='vsmtio-loop',
                                        daemon=True)
        self._thread.start()

    def _serve_metrics(self, metrics, opts):
        """The endpoint, bounded and with TLS as configured.

        One that cannot start (its address taken, a certificate that
        cannot be read) is a warning: the agent runs on without it.
        """
        try:
            context = None
            if opts.metrics_tls_cert_file:
                context = metrics.tls_context(
                    opts.metrics_tls_cert_file, opts.metrics_tls_key_file,
                    opts.metrics_tls_client_ca_file)
            _reg, self.metrics_server = metrics.serve(
                self.collector, opts.metrics_bind_host, opts.metrics_port,
                max_connections=opts.metrics_max_connections,
                read_timeout=opts.metrics_read_timeout, ssl_context=context)
        except OSError as exc:
            LOG.warning('Metrics endpoint not started: %s', exc)
            return
        LOG.info('metrics on %s://%s:%d%s%s',
                 'https' if context else 'http', opts.metrics_bind_host,
                 opts.metrics_port, metrics.METRICS_PATH,
                 ' (client certificates required)'
                 if opts.metrics_tls_client_ca_file else '')

    def _loop(self):
        try:
            self.agent.loop(self.periods, after=self._published,
                            on_error=lambda _exc: self.collector.tick_failed())
        finally:
            self._done.set()

    def _published(self, period):
        """Metrics and the status file of one finished period."""
        if period.start:
            return
        self.collector.observe(period, self.mode, self.driver.refusals())
        opts = self.conf.vsmtio_agent
        # server names are tenants' text: only in a file others cannot read
        doc = status.document(period, self.driver, opts, self.mode,
                              names=status.private(opts.status_path))
        if self.publisher is not None:
            self.publisher.observe(period.stats, period.decision,
                                   period.snapshot.tenancy)
            doc['published'] = self.publisher.summary()
        try:
            checkpoint.write_json_atomic(opts.status_path, doc,
                                         durable=False)
        except OSError as exc:
            LOG.debug('status file not written: %s', exc)

    def wait(self):
        self._done.wait()

    def stop(self, graceful=False):
        """Stop ticking, then put the host back as it was."""
        if self.agent is not None:
            self.agent.halt()
        elif self.driver is not None:
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
        if host.benefits:
            print('can this host benefit:')
            for item in host.benefits:
                print('  %s' % item)
    finally:
        drv.close()
    return 0


def _status(conf):
    opts = conf.vsmtio_agent
    try:
        doc = status.load(opts.status_path)
    except status.StatusError as exc:
        _error(exc)
        return 2
    if doc is not None and _alive(doc['pid']):
        print(status.format_table(doc))
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
        print(status.format_table(status.document(
            agent.period, drv, opts, drv.describe().mode)))
    finally:
        drv.close()
    return 0


def _restore(conf):
    """Put back every original the checkpoint records; no policy runs.

    For the operator and the unit's ``ExecStopPost``: with the daemon
    stopped, killed (its lock is a kernel lock, gone with the process) or
    crash-looping. Idempotent: what is restored leaves the checkpoint, so
    a second run finds nothing and says so. Refused while a running agent
    holds the host (its own stop restores).
    """
    path = conf.vsmtio_agent.checkpoint_path
    if conf.vsmtio_agent.dry_run:
        print('error: restore writes to the host; --dry-run would not')
        return 2
    try:
        drv = load_driver(conf)
    except base.HostDriverError as exc:
        print('error: %s' % exc)
        return 1
    try:
        done = drv.recover()
    finally:
        drv.close()
    if done.refused:
        print('error: %s; nothing restored' % done.refused)
        return 1
    if not done.recorded:
        print('nothing to restore: %s records no change' % path)
        return 0
    print('restored %d of %d recorded change(s) from %s'
          % (done.recorded - done.remaining - done.dropped, done.recorded,
             path))
    if done.dropped:
        print('%d recorded value(s) no host takes were dropped, not '
              'written back (see the log): check what they name by hand'
              % done.dropped)
    if done.remaining:
        print('%d change(s) could not be put back and stay recorded in %s '
              '(see the log); run restore again when the host allows'
              % (done.remaining, path))
    return 1 if done.remaining or done.dropped else 0


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
    """Parse ``argv`` into ``conf``; ``run`` when no command is given.

    Raises ValueError or ``cfg.Error`` in one line for a configuration
    file that cannot be read and for a command line argparse refuses
    (whose usage text it swallows: ``-h`` shows it).
    """
    conf.register_cli_opts(cli_opts)
    conf.register_cli_opt(command_opt)
    logging.register_options(conf)
    refusal = io.StringIO()
    try:
        with contextlib.redirect_stderr(refusal):
            conf(argv, project='vsmtio', prog='vsmtio-agent')
    except SystemExit as exc:
        if not exc.code:
            raise
        lines = refusal.getvalue().strip().splitlines() or ['bad arguments']
        raise ValueError(lines[-1].partition(': error: ')[2] or lines[-1])
    except OSError as exc:
        raise ValueError('cannot read configuration file %s: %s'
                         % (exc.filename, exc.strerror))
    except UnicodeDecodeError as exc:
        raise ValueError('configuration file %s is not UTF-8 text: %s'
                         % (_file_being_read(exc), exc))
    sys.stderr.write(refusal.getvalue())    # warnings, if any
    if conf.host_driver:
        conf.set_override('host_driver', conf.host_driver,
                          group='vsmtio_agent')
    if conf.dry_run:
        conf.set_override('dry_run', True, group='vsmtio_agent')
    return conf


def _file_being_read(exc):
    """The configuration file oslo.config was reading when ``exc`` rose.

    A decoding error does not say which file it came from; oslo.config's
    reader, on the way up, does.
    """
    name = None
    for frame, _line in traceback.walk_tb(exc.__traceback__):
        reader = frame.f_locals.get('self')
        if isinstance(reader, cfg.ConfigParser):
            name = reader.filename
    return name


def validate_conf(conf):
    """Check every option now, in one place, so a bad value stops the start.

    oslo.config checks a value only when it is first read, and the agent
    reads some options only deep inside a period: without this a typo in
    the file would end a running agent with a traceback. The options' own
    types check numbers (finite, within bounds), patterns and CPU lists
    (``vsmtio_agent.conf.types``); a float option of a library (the
    compute API session's) is checked for finiteness here, and an empty
    value for an option that has a default is refused. Raises
    ``cfg.Error`` or ``ValueError`` with a message naming the option.
    """
    _check_host_driver(conf)
    for group, opts in _opts_to_check(conf):
        for opt in opts:
            try:
                value = getattr(getattr(conf, group), opt.dest)
            except cfg.NoSuchOptError as exc:
                if exc.opt_name == opt.dest:
                    # listed for the sample file, registered by
                    # keystoneauth1 only when it loads the auth plugin
                    continue
                # a value's ``$name`` that names no option
                raise _option_error(conf, group, opt.dest,
                                    'its value refers to %s' % exc)
            except cfg.Error as exc:
                # The type's own error (what oslo raised this one from)
                # says why; the files say where.
                raise _option_error(conf, group, opt.dest,
                                    exc.__context__ or exc)
            if isinstance(value, float) and not math.isfinite(value):
                raise _option_error(
                    conf, group, opt.dest,
                    'Should be a finite number, not %s' % value)
            if value in (None, '') and opt.default not in (None, ''):
                # oslo.config reads an empty number as None, which the
                # agent would find only when it uses it (a None period
                # waits forever); an empty path or pattern is as wrong
                raise _option_error(
                    conf, group, opt.dest,
                    'empty: give a value, or remove the line for the '
                    'default (%s)' % (opt.default,))
    opts = conf.vsmtio_agent
    _check_metrics_tls(conf)
    if opts.min_timeout_us > opts.max_timeout_us:
        raise ValueError('[vsmtio_agent] min_timeout_us (%d) is above '
                         'max_timeout_us (%d)'
                         % (opts.min_timeout_us, opts.max_timeout_us))
    engine.Params.from_conf(conf)


def _check_metrics_tls(conf):
    """A key or client CA for the endpoint comes with its certificate."""
    opts = conf.vsmtio_agent
    for needs_cert in ('metrics_tls_key_file', 'metrics_tls_client_ca_file'):
        if getattr(opts, needs_cert) and not opts.metrics_tls_cert_file:
            raise _option_error(conf, 'vsmtio_agent', needs_cert,
                                'set, but metrics_tls_cert_file is not: '
                                'the endpoint would serve plain HTTP')


def _opts_to_check(conf):
    """(group name, options) of the agent and of its host driver.

    A driver that cannot be loaded brings none here: ``run`` and
    ``check`` say why it cannot, as they do for any driver.
    """
    groups = [(group.name, opts) for group, opts in conf_opts.list_opts()]
    try:
        groups += driver_class(conf).register_opts(conf).items()
    except base.HostDriverError:
        pass
    return groups


def _option_error(conf, group, name, why):
    source = _file_setting(conf, group, name)
    return ValueError('[%s] %s%s: %s' % (
        group, name, ' in %s' % source if source else '', why))


def _check_host_driver(conf):
    """A host driver is named, and only from its entry point namespace.

    No default: a compute host whose operator forgot it would otherwise
    run an agent that manages nothing.
    """
    name = conf.vsmtio_agent.host_driver
    names = host_driver_names()
    choices = ', '.join(names) or 'none (vsmtio is not installed)'
    if not name:
        raise ValueError('[vsmtio_agent] host_driver is not set: set it, or '
                         '--host-driver, to one of: %s' % choices)
    if name not in names:
        raise _option_error(conf, 'vsmtio_agent', 'host_driver',
                            '%r is not a host driver; one of: %s'
                            % (name, choices))


def _setup_logging(conf):
    try:
        logging.setup(conf, 'vsmtio')
    except OSError as exc:
        raise ValueError('cannot open the log: %s' % exc)
    except (logging.LogConfigError, TypeError, ValueError) as exc:
        raise ValueError('cannot set up logging: %s' % exc)


def _config_files(conf):
    """``[(path, {section: {key: [values]}})]`` of every file read.

    The ``--config-file`` files and the ``.conf`` files of each
    ``--config-dir``, in oslo.config's order, as its own parser reads
    them; a file it could not read is left out (``main`` has said why).
    """
    files = list(conf.config_file or ())
    dirs = conf.config_dir or ()
    for directory in [dirs] if isinstance(dirs, str) else dirs:
        try:
            files += sorted(os.path.join(directory, n)
                            for n in os.listdir(directory)
                            if n.endswith('.conf'))
        except OSError:
            pass
    parsed = []
    for path in files:
        sections = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError, UnicodeDecodeError):
            continue
        parsed.append((path, sections))
    return parsed


def _file_setting(conf, group, name):
    """The configuration file that sets ``[group] name`` last, or None."""
    found = None
    for path, sections in _config_files(conf):
        if name in sections.get(group, {}):
            found = path
    return found


def unknown_options(conf):
    """One line for each option the files set that the agent does not have.

    oslo.config ignores an option nothing registers, so a misspelt one
    (``mits = false``) silently leaves the default in force. Every key of
    a ``vsmtio`` section of the configuration files is looked up among
    the agent's options, its host driver's (``[vsmtio_sim]``) and
    keystoneauth1's for the configured auth type, by the names oslo.config
    reads (an option's name with underscores, and its deprecated names);
    a section no group has is one line too. ``[DEFAULT]`` and other
    projects' sections are oslo.log's and theirs.
    """
    known = _known_names(conf)
    lines = []
    for path, sections in _config_files(conf):
        for section, keys in sections.items():
            group = section.lower()
            if not group.startswith('vsmtio'):
                continue
            if known.get(group, ()) is None:
                lines.append('[%s] in %s: its auth type loads no '
                             'keystoneauth1 plugin, so the names it sets '
                             'cannot be checked' % (section, path))
                continue
            if group not in known:
                lines.append('[%s] in %s is no group of the agent: its '
                             'options are ignored%s'
                             % (section, path, _close(group, known)))
                continue
            lines += ['[%s] %s in %s is no option of the agent: it is '
                      'ignored%s' % (section, key, path,
                                     _close(key, known[group]))
                      for key in keys if key not in known[group]]
    return lines


def _known_names(conf):
    """``{group: names oslo.config reads there}``; None: not to be told.

    An option is read by its ``dest`` (its name with underscores) and by
    its deprecated names in its own group. The auth group's names are
    None when the configured auth type does not load.
    """
    known = {}
    group, plugin = _auth_plugin_opts(conf)
    for group_name, opts in _opts_to_check(conf) + [(group, plugin or ())]:
        names = known.setdefault(group_name, set())
        for opt in opts:
            names.add(opt.dest)
            names.update(old.name.replace('-', '_')
                         for old in opt.deprecated_opts or ()
                         if old.name and old.group in (None, group_name))
    if plugin is None:
        known[group] = None
    return known


def _auth_plugin_opts(conf):
    """(group, options of the configured keystoneauth1 plugin).

    The options are None when the plugin does not load: an auth type
    nothing provides, which the publisher says when it loads it; its
    options cannot be told from typos here.
    """
    from keystoneauth1 import exceptions as ks_exceptions
    from keystoneauth1 import loading as ks_loading
    from vsmtio_agent.conf import publish as publish_conf
    try:
        auth_type = getattr(conf, publish_conf.AUTH_GROUP).auth_type
    except (cfg.Error, ValueError):
        return publish_conf.AUTH_GROUP, None
    try:
        opts = ks_loading.get_auth_plugin_conf_options(
            auth_type or 'password')
    except (ks_exceptions.NoMatchingPlugin, ImportError, RuntimeError):
        opts = None
    return publish_conf.AUTH_GROUP, opts


def _close(name, candidates):
    match = difflib.get_close_matches(
        name, sorted(c for c in candidates if c), n=1)
    return ' (did you mean %s?)' % match[0] if match else ''


# Every character str.splitlines() breaks a line at, written as an escape.
_LINE_BREAKS = {ord(c): c.encode('unicode_escape').decode('ascii')
                for c in '\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'}


def _error(exc):
    """One line on stderr, however many the message had."""
    text = str(exc).translate(_LINE_BREAKS)
    print('vsmtio-agent: error: %s' % text, file=sys.stderr)


def main(argv=None, conf=None):
    """The command; ``conf`` is for tests (default: the global CONF)."""
    try:
        conf = parse_args(sys.argv[1:] if argv is None else argv,
                          CONF if conf is None else conf)
        validate_conf(conf)
        _setup_logging(conf)
    except (cfg.Error, ValueError) as exc:
        _error(exc)
        return 2
    command = conf.command.name
    unknown = unknown_options(conf)
    if command == 'check':
        for line in unknown:
            print('configuration: %s' % line)
        return _check(conf)
    for line in unknown:
        LOG.warning('%s', line)
    if command == 'status':
        return _status(conf)
    if command == 'restore':
        return _restore(conf)
    return _run(conf)


if __name__ == '__main__':
    sys.exit(main())
