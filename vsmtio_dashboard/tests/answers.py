"""Recorded-shape Prometheus answers for the plugin's tests.

``prometheus_answers.json`` maps each PromQL query the panel sends to the
JSON body Prometheus's ``/api/v1/query`` answers: two hosts, one running
with two VMs (guard verdicts, a reserved VM, per-VM timeouts and served
I/O, a ``NaN`` rate) and one whose scrape is down. A query the panel sends
that the file does not hold fails the test: changing a query means
recording its answer.

``simulated_answers.json`` holds real answers: Prometheus (2.42, scraping
every 5 s) asked every query the panel sends about one agent on the
embedded simulated SMT host (``host_driver = simulated``, the cloud's
scenario and options: ``tools/cloud/configs.py``) a few minutes after
it started, as the panel would have.
"""

import json
import os

from vsmtio_dashboard.api import prometheus

PATH = os.path.join(os.path.dirname(__file__), 'prometheus_answers.json')
SIMULATED_PATH = os.path.join(os.path.dirname(__file__),
                              'simulated_answers.json')
SIM_HOST = '127.0.0.1:19740'
HOST = '10.0.0.11:9729'
DOWN_HOST = '10.0.0.12:9729'
VM1 = '0c6b1c6e-3c7a-4b7e-9d59-1f0e7f1a0001'
VM2 = '0c6b1c6e-3c7a-4b7e-9d59-1f0e7f1a0002'


def load(path=PATH):
    with open(path) as f:
        return json.load(f)


class Recorded:
    """Stands in for :func:`prometheus.query` in view tests.

    No Prometheus runs in a unit test; the parsing of each answer is the
    real one.
    """

    def __init__(self, path=PATH):
        self.payloads = load(path)
        self.asked = []

    def __call__(self, request, promql):
        self.asked.append(promql)
        if promql not in self.payloads:
            raise AssertionError('no recorded answer for %r' % promql)
        return prometheus.parse(self.payloads[promql])
