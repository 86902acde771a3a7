"""OpenMetrics (Prometheus) export of what the agent sees and does.

A collector keeps the agent's latest :class:`~vsmtio_agent.agent.Period`
(one frozen record: a scrape never pairs one period's stats with another's
decision) and renders it when scraped, so vCPUs that left the host leave
the output at once (no stale labelled series), and the agent loop pays
nothing for metrics between scrapes. Served by ``prometheus_client`` on
localhost unless configured otherwise.

Gauges carry the labels OpenStack Watcher's Prometheus datasource reads
by default: ``fqdn`` (this host as nova names it, :func:`host_name`,
matched against the compute node's host) and, per vCPU, ``resource`` (the
instance UUID, which is the libvirt domain UUID nova gives its guests).

The endpoint runs in the root agent and answers whoever can connect, so
what a client can make it hold is bounded (:class:`BoundedServer`): a
connection costs a descriptor, never a thread, until its whole request
has arrived; at most ``metrics_max_connections`` are open at once (the
oldest still-silent one makes way for a new one); each has
``metrics_read_timeout`` seconds to send its request and again to take the
answer; two threads render and send. Only ``GET /metrics`` is served;
anything else gets a fixed answer that repeats nothing of the request.
HTTP itself is the standard library's (``wsgiref``) and the rendering
``prometheus_client``'s: the server only decides when a connection may
take a thread.
"""

import collections
from concurrent import futures
import io
import selectors
import socket
import ssl
import threading
import time
from wsgiref import simple_server

from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client
from prometheus_client import core as prom_core

from vsmtio_agent import model

LOG = logging.getLogger(__name__)


def host_name(opts):
    """The name the metrics carry: nova's name of this compute host.

    ``[vsmtio_agent] metrics_host``; unset, nova-compute's ``[DEFAULT]
    host`` from ``nova_config_file`` (read with oslo.config's own parser,
    as nova reads it), else this machine's host name, which is what nova
    uses when ``host`` is unset. Never ``socket.getfqdn()``: on a host
    whose name does not resolve that is ``localhost``.
    """
    if opts.metrics_host:
        return opts.metrics_host
    sections = {}
    try:
        cfg.ConfigParser(opts.nova_config_file, sections).parse()
    except FileNotFoundError:
        pass
    except (OSError, cfg.ParseError) as exc:
        LOG.warning('Cannot read [DEFAULT] host from %s (%s): the metrics '
                    'carry this machine\'s host name; set [vsmtio_agent] '
                    'metrics_host', opts.nova_config_file, exc)
    values = sections.get('DEFAULT', {}).get('host')
    if values and values[-1].strip():
        return values[-1].strip()
    return socket.gethostname()


class AgentCollector:
    """Per-vCPU class and rates, host mix, timeout, apply counts."""

    def __init__(self, fqdn=None, floors=None):
        """``floors`` is ``{kind: ratio}`` the guard holds each VM to.

        ``computing`` and ``serving`` (``guard_cpu_min``,
        ``guard_io_min``): exported beside each VM's ratio so a reader
        sees how far above or below its floor a VM stands without
        knowing the agent's configuration. None: not exported.
        """
        self.fqdn = fqdn or socket.gethostname()
        self.floors = dict(floors or {})
        self._lock = threading.Lock()
        self._period = None
        self._mode = None
        self._refusals = {}
        self.ticks = 0
        self.tick_failures = 0
        self.applied = 0
        self.failed = 0
        self.unchanged = 0
        self.decisions = {'applied': 0, 'failed': 0, 'dry_run': 0}

    def observe(self, period, mode=None, refusals=None):
        """Record one finished :class:`Period` (called by the loop).

        ``refusals`` is the driver's ``{mechanism: why}`` of what the host
        refused (:meth:`HostDriver.refusals`): a refused timeout is not
        exported as in force.
        """
        with self._lock:
            self._period = period
            self._refusals = dict(refusals or {})
            if mode is not None:
                self._mode = mode
            self.ticks += 1
            result = period.result
            if result is None:
                self.decisions['dry_run'] += 1
            else:
                self.decisions['failed' if result.failed else 'applied'] += 1
                self.applied += result.applied
                self.failed += result.failed
                self.unchanged += result.unchanged

    def tick_failed(self):
        with self._lock:
            self.tick_failures += 1

    def collect(self):
        for family in self._families():
            if family.type == 'gauge':
                family.samples = [s._replace(labels=self._watcher_labels(
                    s.labels)) for s in family.samples]
            yield family

    def _watcher_labels(self, labels):
        extra = {'fqdn': self.fqdn}
        if 'domain' in labels:
            extra['resource'] = labels['domain']
        return {**labels, **extra}

    def _families(self):
        with self._lock:
            period, mode = self._period, self._mode
            refusals = self._refusals
            counts = (self.ticks, self.tick_failures, self.applied,
                      self.failed, self.unchanged)
            decisions_by = dict(self.decisions)
        g = prom_core.GaugeMetricFamily
        c = prom_core.CounterMetricFamily
        ticks, tick_failures, applied, failed, unchanged = counts
        yield c('vsmtio_periods', 'Policy periods completed.', value=ticks)
        yield c('vsmtio_period_failures',
                'Periods skipped because the host could not be sampled.',
                value=tick_failures)
        decisions = c('vsmtio_decisions',
                      'Decisions by outcome: applied in full, with failed '
                      'changes, or only logged (dry run).',
                      labels=['outcome'])
        for outcome, n in sorted(decisions_by.items()):
            decisions.add_metric([outcome], n)
        yield decisions
        changes = c('vsmtio_changes',
                    'Host changes by outcome (applied, failed, unchanged).',
                    labels=['outcome'])
        changes.add_metric(['applied'], applied)
        changes.add_metric(['failed'], failed)
        changes.add_metric(['unchanged'], unchanged)
        yield changes
        if mode is not None:
            info = g('vsmtio_host_mode', 'The host mode the agent runs in.',
                     labels=['mode'])
            info.add_metric([mode], 1)
            yield info
        if period is None:
            return
        decision, stats = period.decision, period.stats
        yield from _mechanism_families(g, period, refusals)
        if 'retention' not in refusals:
            # a timeout the host refused is not in force: absent, not a
            # value (vsmtio_host_refused says why)
            yield g('vsmtio_retention_timeout_seconds',
                    'Context-retention timeout LTCR chose for this period.',
                    value=decision.timeout_ns / 1e9)
        mix = {role: 0 for role in model.Role}
        klass = g('vsmtio_vcpu_class', 'RASS class of each vCPU (1).',
                  labels=['domain', 'vcpu', 'class'])
        rates = {
            'retention_rate': g('vsmtio_vcpu_retention_rate',
                                'Share of the period in context retention.',
                                labels=['domain', 'vcpu']),
            'utilisation': g('vsmtio_vcpu_utilisation',
                             'Share of the period the vCPU ran.',
                             labels=['domain', 'vcpu']),
            'ipc': g('vsmtio_vcpu_ipc', 'Instructions per cycle.',
                     labels=['domain', 'vcpu']),
            'i_cpu': g('vsmtio_vcpu_i_cpu',
                       'MIST interference ratio: involuntary context '
                       'switches per voluntary one (a ratio, no unit).',
                       labels=['domain', 'vcpu']),
            'runqueue_delay_ratio': g(
                'vsmtio_vcpu_runqueue_delay_ratio',
                'Share of the period the vCPU waited on a run queue.',
                labels=['domain', 'vcpu']),
        }
        for ref, placement in sorted(decision.placements.items()):
            labels = [ref.domain, str(ref.index)]
            mix[placement.role] += 1
            klass.add_metric(labels + [placement.role.value], 1)
            st = stats.get(ref)
            for name, family in rates.items():
                value = getattr(st, name, None) if st else None
                if value is not None:   # missing stays missing
                    family.add_metric(labels, value)
        host = g('vsmtio_host_vcpus', 'vCPUs of each class on this host.',
                 labels=['class'])
        for role, n in mix.items():
            host.add_metric([role.value], n)
        yield host
        yield klass
        yield from rates.values()
        if period.verdicts is not None:
            yield from _guard_families(g, period,
                                       'retention' in refusals)
            yield from _floor_families(g, period, self.floors)
        if period.mist is not None:
            yield from _mist_families(g, period.mist)


def _mechanism_families(g, period, refusals):
    """What the host refused and the engine does not try, and why."""
    refused = g('vsmtio_host_refused',
                'A mechanism the host refused (always 1), and the host\'s '
                'reason: its value is not in force.',
                labels=['mechanism', 'reason'])
    for mechanism, why in sorted(refusals.items()):
        refused.add_metric([mechanism, why], 1)
    yield refused
    untried = g('vsmtio_mechanism_untried',
                'A mechanism the agent does not try on this host (always '
                '1), and why.', labels=['mechanism', 'reason'])
    for mechanism, why in sorted((period.untried or {}).items()):
        untried.add_metric([mechanism, why], 1)
    yield untried


def _guard_families(g, period, timeout_refused=False):
    """What the guard keeps, per mechanism and VM, and why.

    No per-VM timeout where the host refused the timeout: none is in
    force.
    """
    kept = g('vsmtio_guard_kept',
             'Whether the guard keeps the mechanism (1) or not (0); domain '
             'is the VM of a per-VM mechanism, empty for a host-wide one.',
             labels=['mechanism', 'domain'])
    verdict = g('vsmtio_guard_verdict',
                'The guard\'s last verdict on the mechanism (always 1): '
                'kept or not, and why.',
                labels=['mechanism', 'domain', 'kept', 'reason'])
    for v in period.verdicts:
        domain = v.domain or ''
        kept.add_metric([v.mechanism, domain], 1 if v.kept else 0)
        verdict.add_metric([v.mechanism, domain, str(v.kept).lower(),
                            v.reason], 1)
    yield kept
    yield verdict
    if period.retaining is not None and not timeout_refused:
        timeout = g('vsmtio_vm_retention_timeout_seconds',
                    'The retention timeout the guard keeps for the VM.',
                    labels=['domain'])
        for domain, ns in sorted(period.retaining.items()):
            timeout.add_metric([domain], ns / 1e9)
        yield timeout
    if period.served is not None:
        served = g('vsmtio_vm_served_rate',
                   'Requests and packets the VM served per second (its '
                   'block and interface statistics).', labels=['domain'])
        for domain, rate in sorted(period.served.items()):
            if rate is not None:
                served.add_metric([domain], rate)
        yield served


def _floor_families(g, period, floors):
    """Each VM's ratio in the guard's last verdicts, and the floors.

    What the guard's reasons say in words (``matmul 0.967 < 0.97``), as
    numbers a chart can follow over time: a computing VM's ratio is the
    instructions it retired with the mechanism over without, which the
    guard holds to ``guard_cpu_min``.
    """
    ratio = g('vsmtio_guard_vm_ratio',
              'Each VM\'s throughput with the mechanism over without it in '
              'the guard\'s last verdict on it (a ratio, no unit); domain '
              'is the VM of a per-VM mechanism, vm the VM measured, kind '
              'computing or serving.',
              labels=['mechanism', 'domain', 'vm', 'kind'])
    for v in period.verdicts:
        for vm, kind, value in v.ratios:
            ratio.add_metric([v.mechanism, v.domain or '', vm, kind], value)
    yield ratio
    if floors:
        floor = g('vsmtio_guard_floor',
                  'The ratio the guard holds each VM of the kind to '
                  '(guard_cpu_min, guard_io_min).', labels=['kind'])
        for kind, value in sorted(floors.items()):
            floor.add_metric([kind], value)
        yield floor


def _mist_families(g, verdicts):
    """MIST's verdict per reserved domain: protected, and its I_cpu."""
    protected = g('vsmtio_mist_protected',
                  'Whether MIST protects the reserved VM this period (1) '
                  'or not (0).', labels=['domain'])
    i_cpu = g('vsmtio_mist_vm_i_cpu',
              'MIST interference ratio of the reserved VM: involuntary '
              'context switches of its vCPUs per voluntary one (a ratio, '
              'no unit).', labels=['domain'])
    for domain, v in sorted(verdicts.items()):
        protected.add_metric([domain], 1 if v.protect else 0)
        if v.i_cpu is not None:
            i_cpu.add_metric([domain], v.i_cpu)
    yield protected
    yield i_cpu


#: The one path served.
METRICS_PATH = '/metrics'
# A scrape's request line and headers: a few hundred bytes from Prometheus,
# a few kB with a bearer token. Longer is not a scrape.
MAX_HEAD = 16 * 1024
# Threads that render and send: a scrape takes milliseconds, and a slow
# reader holds one for at most the read timeout.
WORKERS = 2
_HEAD_ENDS = (b'\r\n\r\n', b'\n\n')
LISTEN_BACKLOG = 128


def metrics_app(registry):
    """``prometheus_client``'s WSGI app, on :data:`METRICS_PATH` only.

    Its own app answers every path and puts the request's method in the
    body of a refusal; here anything but ``GET /metrics`` is a fixed
    answer, and a failure to render is one log line and a 500.
    """
    render = prometheus_client.make_wsgi_app(registry)

    def app(environ, start_response):
        if environ.get('PATH_INFO') != METRICS_PATH:
            return _fixed(start_response, '404 Not Found',
                          b'Not found: the metrics are at /metrics\n')
        if environ.get('REQUEST_METHOD') != 'GET':
            return _fixed(start_response, '405 Method Not Allowed',
                          b'Only GET is served\n', [('Allow', 'GET')])
        try:
            return render(environ, start_response)
        except Exception as exc:    # a collector's bug: one line, not a trace
            LOG.warning('Cannot render the metrics: %s', exc)
            return _fixed(start_response, '500 Internal Server Error',
                          b'The metrics could not be rendered\n')

    return app


def _fixed(start_response, status, body, headers=()):
    start_response(status, [('Content-Type', 'text/plain; charset=utf-8'),
                            ('Content-Length', str(len(body)))]
                   + list(headers))
    return [body]


def tls_context(cert_file, key_file=None, client_ca_file=None):
    """A server TLS context: TLS 1.2 at least; client certificates if a CA.

    ``OSError`` (``ssl.SSLError`` is one) if a file cannot be used.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file or None)
    if client_ca_file:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class _ErrorSink(io.StringIO):
    """``wsgi.errors``: what wsgiref would print to stderr, one debug line.

    A client that goes away mid-answer or stops reading ends its request
    with an exception wsgiref prints in full; for the agent it is the
    client's business.
    """

    def flush(self):
        text = self.getvalue().strip()
        if text:
            LOG.debug('metrics request: %s', text.splitlines()[-1])
        self.seek(0)
        self.truncate()


class _Handler(simple_server.WSGIRequestHandler):
    """The standard library's WSGI handler, over a request already read.

    The server read the request's head before it gave the connection a
    thread: the handler parses that, and writes the answer to the socket,
    under the server's timeout.
    """

    def __init__(self, request, client_address, server, head):
        self._head = head
        super().__init__(request, client_address, server)

    @property
    def timeout(self):
        return self.server.read_timeout

    def setup(self):
        super().setup()
        self.rfile.close()
        self.rfile = io.BytesIO(self._head)

    def get_stderr(self):
        return _ErrorSink()

    def send_error(self, code, message=None, explain=None):
        """The status line and body of ``code`` alone.

        The standard handler quotes the malformed request line or version
        back: nothing of the request is repeated here.
        """
        super().send_error(code)

    def log_message(self, format, *args):
        """No access log: a scrape every few seconds would flood it."""


class _Waiting:
    """A connection whose request has not all arrived yet."""

    __slots__ = ('sock', 'address', 'deadline', 'head', 'handshake')

    def __init__(self, sock, address, deadline, handshake):
        self.sock, self.address, self.deadline = sock, address, deadline
        self.head = b''
        self.handshake = handshake


class BoundedServer(simple_server.WSGIServer):
    """An HTTP server whose clients cannot exhaust the agent.

    One thread (:meth:`serve_forever`) accepts connections and reads each
    one's request head without blocking; a connection takes a worker
    thread (:data:`WORKERS` of them) only once its head is complete. At
    most ``max_connections`` are open, waiting or being answered: a new
    one closes the oldest still waiting, or is closed itself when all are
    being answered. A connection still waiting ``read_timeout`` seconds
    after it was accepted is closed; the worker's socket has the same
    timeout for the answer. With ``ssl_context`` the TLS handshake is part
    of the wait.
    """

    def __init__(self, host, port, app, max_connections, read_timeout,
                 ssl_context=None):
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        self.address_family = family
        # The kernel's queue of connections not yet accepted (the kernel's
        # memory, not the agent's): deep enough that a burst waits there
        # for the loop to make room rather than losing its SYNs.
        self.request_queue_size = max(LISTEN_BACKLOG, max_connections)
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.ssl_context = ssl_context
        super().__init__(address, _Handler)
        self.set_app(app)
        self._waiting = collections.OrderedDict()   # socket -> _Waiting
        self._answering = set()     # sockets handed to a worker
        self._lock = threading.Lock()
        self._pool = futures.ThreadPoolExecutor(
            WORKERS, thread_name_prefix='vsmtio-metrics')
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._selector = None
        self.thread = None      # the thread serve_forever runs in

    def open_connections(self):
        """How many connections are open (waiting or being answered)."""
        with self._lock:
            return len(self._waiting) + len(self._answering)

    def serve_forever(self, poll_interval=0.5):
        self.socket.setblocking(False)
        self._selector = sel = selectors.DefaultSelector()
        sel.register(self.socket, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _events in sel.select(self._wait_s(poll_interval)):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.data is not None:
                        self._read(key.data)
                self._expire()
        finally:
            for waiting in list(self._waiting.values()):
                self._drop(waiting)
            sel.close()

    def _wait_s(self, poll_interval):
        if not self._waiting:
            return poll_interval
        oldest = next(iter(self._waiting.values()))
        return max(0.0, min(poll_interval, oldest.deadline - time.monotonic()))

    def _accept(self):
        # A burst is taken in one go, a bounded one: the loop must come
        # back to the connections already waiting.
        for _ in range(self.max_connections):
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of descriptors: make room, or let the next round.
                LOG.debug('metrics: cannot accept: %s', exc)
                if not self._evict():
                    self._stop.wait(0.1)
                return
            if self.open_connections() >= self.max_connections:
                if not self._evict():
                    sock.close()        # all are being answered
                    continue
            self._wait_for(sock, address)

    def _wait_for(self, sock, address):
        sock.setblocking(False)
        handshake = self.ssl_context is not None
        try:
            if handshake:
                sock = self.ssl_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False)
        except OSError:
            sock.close()
            return
        waiting = _Waiting(sock, address,
                           time.monotonic() + self.read_timeout, handshake)
        with self._lock:
            self._waiting[sock] = waiting
        self._selector.register(sock, selectors.EVENT_READ, waiting)

    def _read(self, waiting):
        sock = waiting.sock
        try:
            if waiting.handshake:
                sock.do_handshake()
                waiting.handshake = False
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    self._drop(waiting)
                    return
                waiting.head += chunk
                if any(end in waiting.head for end in _HEAD_ENDS):
                    self._answer(waiting)
                    return
                if len(waiting.head) > MAX_HEAD:
                    self._drop(waiting)
                    return
        except ssl.SSLWantReadError:
            self._selector.modify(sock, selectors.EVENT_READ, waiting)
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE, waiting)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:      # reset, or a failed handshake
            LOG.debug('metrics: connection from %s: %s', waiting.address,
                      exc)
            self._drop(waiting)

    def _forget(self, waiting):
        with self._lock:
            self._waiting.pop(waiting.sock, None)
        self._selector.unregister(waiting.sock)

    def _drop(self, waiting):
        self._forget(waiting)
        waiting.sock.close()

    def _evict(self):
        """Close the oldest waiting connection; False if none waits."""
        with self._lock:
            if not self._waiting:
                return False
            oldest = next(iter(self._waiting.values()))
        self._drop(oldest)
        return True

    def _expire(self):
        now = time.monotonic()
        while self._waiting:
            oldest = next(iter(self._waiting.values()))
            if oldest.deadline > now:
                return
            self._drop(oldest)

    def _answer(self, waiting):
        self._forget(waiting)
        with self._lock:
            self._answering.add(waiting.sock)
        try:
            self._pool.submit(self._handle, waiting)
        except RuntimeError:        # shutting down
            self._close(waiting.sock)

    def _handle(self, waiting):
        sock = waiting.sock
        try:
            sock.setblocking(True)
            _Handler(sock, waiting.address, self, waiting.head)
        except Exception as exc:    # the client's trouble, not the agent's
            LOG.debug('metrics: answering %s: %s', waiting.address, exc)
        finally:
            self._close(sock)

    def _close(self, sock):
        with self._lock:
            self._answering.discard(sock)
        try:
            self.shutdown_request(sock)
        except OSError:
            pass

    def shutdown(self):
        """Stop serving and close every connection and the port."""
        self._stop.set()
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        if self.thread is not None:
            self.thread.join()
        with self._lock:
            answering = list(self._answering)
        for sock in answering:      # a worker blocked on it returns now
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.server_close()
        self._wake_r.close()
        self._wake_w.close()


def serve(collector, host, port, max_connections=16, read_timeout=5.0,
          ssl_context=None):
    """Start the endpoint in a thread; return (registry, server).

    ``OSError`` if it cannot listen (the address is taken, say).
    """
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    server = BoundedServer(host, port, metrics_app(registry),
                           max_connections, read_timeout, ssl_context)
    server.thread = threading.Thread(target=server.serve_forever,
                                     name='vsmtio-metrics', daemon=True)
    server.thread.start()
    return registry, server
