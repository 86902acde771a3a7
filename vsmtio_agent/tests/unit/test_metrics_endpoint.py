"""The metrics endpoint: what a client can make the root agent hold.

Real sockets on 127.0.0.1 throughout: the endpoint in this process for its
answers, and the agent as a process of its own (on the simulated host, the
one host driver that needs no libvirt) for its threads and descriptors,
which are counted in its ``/proc/<pid>`` as an operator would.
"""

import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import fixtures
import testtools

from vsmtio_agent import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# Idle connections a local user opens: far more than the limit, far below
# this process's descriptor limit (1024 by default).
IDLE = 400


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def open_idle(port, n, deadline):
    """Up to ``n`` connections that send nothing; stops at ``deadline``."""
    socks = []
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        try:
            socks.append(socket.create_connection(('127.0.0.1', port),
                                                  timeout=1.0))
        except OSError:
            continue        # refused or timed out: the server's choice
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def closed(sock):
    """Whether the server closed ``sock`` (unread data makes it a reset)."""
    try:
        return sock.recv(1) == b''
    except ConnectionResetError:
        return True


def raw(port, data, timeout=3.0):
    """Send ``data`` on a new connection; what comes back until close."""
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        s.sendall(data)
        out = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


class TestEndpoint(testtools.TestCase):

    def serve(self, **kwargs):
        collector = metrics.AgentCollector('compute-1')
        _registry, server = metrics.serve(collector, '127.0.0.1', 0,
                                          **kwargs)
        self.addCleanup(server.shutdown)
        return server, server.server_address[1]

    def test_only_get_metrics_is_served_and_nothing_is_echoed(self):
        _server, port = self.serve()
        body = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                      timeout=5).read().decode()
        self.assertIn('vsmtio_periods_total 0.0', body)
        marker = '<script>x</script>'
        for path in ('/', '/metrics/', '/favicon.ico', '/' + marker):
            exc = self.assertRaises(
                urllib.error.HTTPError, urllib.request.urlopen,
                'http://127.0.0.1:%d%s' % (port, path), timeout=5)
            self.assertEqual(404, exc.code, path)
            self.assertNotIn(b'script', exc.read())
        for method in ('POST', 'PUT', 'HEAD', 'OPTIONS', marker):
            answer = raw(port, b'%s /metrics HTTP/1.0\r\n\r\n'
                         % method.encode())
            self.assertTrue(answer.startswith(b'HTTP/1.0 405 ')
                            or answer.startswith(b'HTTP/1.0 400 '),
                            answer[:80])
            self.assertNotIn(b'script', answer)
            self.assertNotIn(method.encode(), answer.split(b'\r\n\r\n')[1])
        # a malformed request line: the standard answer, without the line
        answer = raw(port, b'GET /metrics HTTP/9.' + marker.encode()
                     + b'\r\n\r\n')
        self.assertIn(b' 400 ', answer.split(b'\r\n')[0])
        self.assertNotIn(b'script', answer)

    def test_idle_connections_cost_no_thread_and_are_bounded(self):
        server, port = self.serve(max_connections=8, read_timeout=30.0)
        threads = threading.active_count()
        idle = open_idle(port, 100, time.monotonic() + 20)
        self.addCleanup(close_all, idle)
        self.assertGreater(len(idle), 50)
        time.sleep(0.2)
        self.assertLessEqual(server.open_connections(), 8)
        self.assertEqual(threads, threading.active_count())
        # the oldest idle ones were closed to make room
        idle[0].settimeout(2.0)
        self.assertTrue(closed(idle[0]))
        start = time.monotonic()
        body = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                      timeout=5).read()
        self.assertLess(time.monotonic() - start, 2.0)
        self.assertIn(b'vsmtio_periods_total', body)
        self.assertLessEqual(threading.active_count(),
                             threads + metrics.WORKERS)

    def test_a_silent_or_slow_client_is_closed_at_the_timeout(self):
        server, port = self.serve(read_timeout=0.5)
        silent = socket.create_connection(('127.0.0.1', port), timeout=5)
        self.addCleanup(silent.close)
        slow = socket.create_connection(('127.0.0.1', port), timeout=5)
        self.addCleanup(slow.close)
        start = time.monotonic()
        slow.sendall(b'GET /metrics HTTP/1.0\r\n')     # never finishes
        self.assertTrue(closed(silent))
        self.assertTrue(closed(slow))
        self.assertLess(time.monotonic() - start, 3.0)
        self.assertEqual(0, server.open_connections())

    def test_an_endless_head_is_closed(self):
        server, port = self.serve()
        with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
            s.sendall(b'GET /metrics HTTP/1.0\r\n')
            try:
                for _ in range(metrics.MAX_HEAD // 1024 + 2):
                    s.sendall(b'X-Pad: ' + b'a' * 1015 + b'\r\n')
            except OSError:
                pass        # closed while we sent: what is tested
            self.assertTrue(closed(s))
        self.assertEqual(0, server.open_connections())

    def test_shutdown_closes_the_port_and_its_threads(self):
        threads = threading.active_count()
        collector = metrics.AgentCollector('compute-1')
        _registry, server = metrics.serve(collector, '127.0.0.1', 0)
        port = server.server_address[1]
        idle = socket.create_connection(('127.0.0.1', port), timeout=5)
        self.addCleanup(idle.close)
        urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                               timeout=5).read()
        server.shutdown()
        self.assertTrue(closed(idle))
        self.assertRaises(OSError, socket.create_connection,
                          ('127.0.0.1', port), timeout=1)
        self.assertEqual(threads, threading.active_count())


class TestTls(testtools.TestCase):
    """HTTPS with client certificates, made with the openssl command."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.ca = self.certificate('ca', None)
        self.server = self.certificate('server', 'ca')
        self.client = self.certificate('client', 'ca')
        self.stranger = self.certificate('stranger', None)

    def certificate(self, name, issuer):
        """(cert, key) of ``name``, self-signed or signed by ``issuer``."""
        cert = os.path.join(self.dir, name + '.pem')
        key = os.path.join(self.dir, name + '.key')
        subj = '/CN=%s' % ('127.0.0.1' if name == 'server' else name)
        if issuer is None:
            cmd = ['openssl', 'req', '-x509', '-newkey', 'ec',
                   '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
                   '-keyout', key, '-out', cert, '-days', '2',
                   '-subj', subj, '-addext', 'basicConstraints=CA:TRUE']
            run = subprocess.run(cmd, capture_output=True, text=True)
        else:
            csr = os.path.join(self.dir, name + '.csr')
            ext = os.path.join(self.dir, name + '.ext')
            with open(ext, 'w') as f:
                f.write('subjectAltName=IP:127.0.0.1\n')
            run = subprocess.run(
                ['openssl', 'req', '-newkey', 'ec', '-pkeyopt',
                 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key,
                 '-out', csr, '-subj', subj],
                capture_output=True, text=True)
            self.assertEqual(0, run.returncode, run.stderr)
            ca_cert, ca_key = (os.path.join(self.dir, issuer + s)
                               for s in ('.pem', '.key'))
            run = subprocess.run(
                ['openssl', 'x509', '-req', '-in', csr, '-CA', ca_cert,
                 '-CAkey', ca_key, '-CAcreateserial', '-out', cert,
                 '-days', '2', '-extfile', ext],
                capture_output=True, text=True)
        self.assertEqual(0, run.returncode, run.stderr)
        return cert, key

    def client_context(self, identity):
        context = ssl.create_default_context(cafile=self.ca[0])
        if identity is not None:
            context.load_cert_chain(*identity)
        return context

    def test_https_answers_only_clients_the_ca_signed(self):
        context = metrics.tls_context(self.server[0], self.server[1],
                                      self.ca[0])
        _registry, server = metrics.serve(
            metrics.AgentCollector('compute-1'), '127.0.0.1', 0,
            read_timeout=2.0, ssl_context=context)
        self.addCleanup(server.shutdown)
        url = 'https://127.0.0.1:%d/metrics' % server.server_address[1]
        body = urllib.request.urlopen(
            url, context=self.client_context(self.client), timeout=5).read()
        self.assertIn(b'vsmtio_periods_total', body)
        for identity in (None, self.stranger):
            self.assertRaises(OSError, lambda: urllib.request.urlopen(
                url, context=self.client_context(identity),
                timeout=5).read())
        # plain HTTP on the TLS port: no answer, and nothing held
        self.assertRaises(OSError, lambda: urllib.request.urlopen(
            url.replace('https', 'http'), timeout=5).read())
        time.sleep(0.1)
        self.assertEqual(0, server.open_connections())

    def test_an_unusable_certificate_is_one_oserror(self):
        self.assertRaises(OSError, metrics.tls_context,
                          os.path.join(self.dir, 'missing.pem'))
        self.assertRaises(OSError, metrics.tls_context, self.server[0],
                          self.stranger[1])


class TestAgentUnderIdleConnections(testtools.TestCase):
    """The running agent, its endpoint held by hundreds of idle clients."""

    def test_it_still_answers_and_holds_a_bounded_count(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        port = free_port()
        conf = os.path.join(tmp, 'agent.conf')
        with open(conf, 'w') as f:
            f.write('[vsmtio_agent]\nhost_driver = simulated\n'
                    'period = 0.5\nmetrics_port = %d\n'
                    'metrics_max_connections = 16\n'
                    'metrics_read_timeout = 30\n'
                    'checkpoint_path = %s/state/ckpt.json\n'
                    'status_path = %s/status.json\n'
                    'nova_config_file = %s/nova.conf\n'
                    % (port, tmp, tmp, tmp))
        log = tempfile.TemporaryFile(dir=tmp)
        self.addCleanup(log.close)
        agent = subprocess.Popen(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', conf, 'run', '--periods', '100000'],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
            stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop, agent)
        url = 'http://127.0.0.1:%d/metrics' % port
        self.wait_for(agent, url, log)

        def held():
            return (len(os.listdir('/proc/%d/task' % agent.pid)),
                    len(os.listdir('/proc/%d/fd' % agent.pid)))

        threads, fds = held()
        idle = open_idle(port, IDLE, time.monotonic() + 60)
        self.addCleanup(close_all, idle)
        self.assertGreater(len(idle), IDLE // 2)
        time.sleep(0.5)
        start = time.monotonic()
        body = urllib.request.urlopen(url, timeout=5).read()
        took = time.monotonic() - start
        self.assertIn(b'vsmtio_periods_total', body)
        self.assertLess(took, 3.0)
        now_threads, now_fds = held()
        # two workers at most; the limit's descriptors and a few more
        self.assertLessEqual(now_threads, threads + metrics.WORKERS)
        self.assertLessEqual(now_fds, fds + 16 + 4)

    def wait_for(self, agent, url, log):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if agent.poll() is not None:
                log.seek(0)
                self.fail('the agent ended: %s'
                          % log.read().decode()[-2000:])
            try:
                urllib.request.urlopen(url, timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        self.fail('no metrics endpoint within 60 s')

    @staticmethod
    def stop(agent):
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
