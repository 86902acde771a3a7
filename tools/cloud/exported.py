"""What an agent's ``/metrics`` exported while a page was read.

The panel goes agent -> Prometheus -> Aetos -> Horizon, so a figure it
shows must be one the agent exported in the last scrape intervals before
the page was read: ``AgentExport`` reads the export in a thread, and
``within`` says whether a figure lies in what it went through.
"""

import threading
import time
import urllib.request

import layout


class AgentExport:
    """The agent's ``/metrics``, read every quarter second in a thread.

    Four reads a second: a value that holds a few periods is seen (a
    verdict, a class); one that steps every period may fall between two
    reads (:func:`within`). ``port`` names the agent's endpoint in
    ``layout.PORTS``.
    """

    def __init__(self, port='agent-metrics'):
        self.port = port
        self.samples = []   # (monotonic time, {(name, labels): value})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        from prometheus_client import parser
        url = layout.url(self.port, '/metrics')
        while not self._stop.is_set():
            with urllib.request.urlopen(url, timeout=5) as resp:
                text = resp.read().decode()
            values = {}
            for family in parser.text_string_to_metric_families(text):
                for s in family.samples:
                    values[(s.name, tuple(sorted(s.labels.items())))] = \
                        s.value
            self.samples.append((time.monotonic(), values))
            self._stop.wait(0.25)

    def values(self, name, since, **labels):
        """Every value the agent exported for a series since ``since``."""
        out = set()
        for when, values in self.samples:
            if when < since:
                continue
            for (n, lbls), value in values.items():
                lbls = dict(lbls)
                if n == name and all(lbls.get(k) == v
                                     for k, v in labels.items()):
                    out.add(value)
        return out

    def classes(self, since):
        """Each domain's measured classes (the agent's tie rule)."""
        out = {}
        for when, values in self.samples:
            if when < since:
                continue
            count = {}
            for (n, lbls), value in values.items():
                lbls = dict(lbls)
                if n == 'vsmtio_vcpu_class' and value:
                    io, cpu = count.get(lbls['domain'], (0, 0))
                    count[lbls['domain']] = (
                        io + (lbls['class'] == 'io'),
                        cpu + (lbls['class'] == 'cpu'))
            for domain, (io, cpu) in count.items():
                out.setdefault(domain, set()).add(
                    'io' if io * 2 >= io + cpu else 'cpu')
        return out

    def labels(self, name, since, **labels):
        """The label sets of the series ``name`` exported (non-zero)."""
        out = []
        for when, values in self.samples:
            if when < since:
                continue
            for (n, lbls), value in values.items():
                lbls = dict(lbls)
                if n == name and value and all(
                        lbls.get(k) == v for k, v in labels.items()):
                    out.append(lbls)
        return out


def within(expected, shown, what, rel=0.0):
    """Fail unless ``shown`` lies in the range the export went through.

    The agent's period (0.1 s by default) is shorter than the sampler's
    quarter second, so a value that steps each period (a counter, a
    served rate, a timeout LTCR moves) may be one Prometheus scraped and
    no sample caught; one outside the range of the samples (by more than
    ``rel``: the panel rounds to three digits) was not read from this
    agent in this window. A constant must be the constant.
    """
    if not expected or not (min(expected) * (1 - rel) - 1e-12 <= shown
                            <= max(expected) * (1 + rel) + 1e-12):
        raise AssertionError('%s: the panel shows %r, the agent went from '
                             '%r to %r' % (what, shown, min(expected or [0]),
                                           max(expected or [0])))
