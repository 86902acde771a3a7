"""The query client against a real HTTP server standing in for Aetos."""

import http.server
import json
import threading
import types
import unittest
from urllib import parse

from django.test import utils as django_utils

from vsmtio_dashboard.api import prometheus
from vsmtio_dashboard.tests import answers


class _Aetos(http.server.BaseHTTPRequestHandler):
    """Answers ``/api/v1/query`` from the recorded answers.

    401 without a token, 400 with Prometheus's error body for a query it
    has no answer to.
    """

    def do_GET(self):
        url = parse.urlsplit(self.path)
        self.server.seen.append((url.path, self.headers.get('X-Auth-Token')))
        query = parse.parse_qs(url.query).get('query', [''])[0]
        if not self.headers.get('X-Auth-Token'):
            self._send(401, {'error': 'unauthorized'})
        elif url.path != '/prom/api/v1/query':
            self._send(404, {'error': 'not found'})
        elif query in self.server.payloads:
            self._send(200, self.server.payloads[query])
        else:
            self._send(400, {'status': 'error', 'errorType': 'bad_data',
                             'error': 'parse error at char 1'})

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class QueryTest(unittest.TestCase):
    def setUp(self):
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      _Aetos)
        self.server.payloads = answers.load()
        self.server.seen = []
        thread = threading.Thread(target=self.server.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        endpoint = 'http://127.0.0.1:%d/prom/' % self.server.server_port
        override = django_utils.override_settings(
            VSMTIO_METRICS_ENDPOINT=endpoint)
        override.enable()
        self.addCleanup(override.disable)
        self.request = types.SimpleNamespace(user=types.SimpleNamespace(
            token=types.SimpleNamespace(id='the-users-token')))

    def test_vector_with_the_users_token(self):
        from vsmtio_dashboard import overview
        samples = prometheus.query(self.request,
                                   overview.HOST_QUERIES['vcpus'])
        self.assertEqual({'io': 3.0, 'cpu': 1.0},
                         {s.labels['class']: s.value for s in samples})
        self.assertEqual([('/prom/api/v1/query', 'the-users-token')],
                         self.server.seen)

    def test_matrix(self):
        from vsmtio_dashboard import overview
        series = prometheus.query(self.request, overview.chart_query(
            overview.CHARTS[0], answers.HOST))
        self.assertEqual(2, len(series))
        self.assertEqual(4, len(series[0].points))

    def test_prometheus_error_is_said(self):
        with self.assertRaisesRegex(prometheus.MetricsUnavailable,
                                    'answered 400: parse error at char 1'):
            prometheus.query(self.request, 'sum(')

    def test_unreachable_endpoint(self):
        self.server.shutdown()
        self.server.server_close()
        with self.assertRaises(prometheus.MetricsUnavailable):
            prometheus.query(self.request, 'up')


class ParseTest(unittest.TestCase):
    def test_scalar_and_non_finite(self):
        out = prometheus.parse({'status': 'success', 'data': {
            'resultType': 'scalar', 'result': [1.0, '+Inf']}})
        self.assertEqual([prometheus.Sample({}, None)], out)

    def test_failure(self):
        with self.assertRaisesRegex(prometheus.MetricsUnavailable, 'boom'):
            prometheus.parse({'status': 'error', 'error': 'boom'})
        with self.assertRaises(prometheus.MetricsUnavailable):
            prometheus.parse('<html>')
