"""What each running domain serves: block requests and network packets.

The guard judges a serving VM by what it serves, never by its vCPUs' idle
exits (context retention removes those while the requests go on), and
every host can count that: libvirt's per-domain block and interface
statistics. They come in the sampler's one bulk ``getAllDomainStats``
call of each period (:data:`GROUPS` beside its state and vCPU groups), not
in a call per domain. A figure the host did not report is ``None``
(missing, never zero); a domain with no disk or no interface serves 0 of
that kind.
"""

import libvirt

from vsmtio_agent import model

#: the stats groups the sampler asks for, for every running domain
GROUPS = libvirt.VIR_DOMAIN_STATS_BLOCK | libvirt.VIR_DOMAIN_STATS_INTERFACE


def block_totals(stats):
    """(requests, bytes, busy ns) summed over a domain's disks.

    Busy ns is the time its reads and writes spent in flight (libvirt's
    ``rd.times`` and ``wr.times``), the evidence of demand MIST's detector
    needs; ``None`` where a disk lacks it. Flushes (``fl.*``) count in
    none of the three: a flush moves no data a reservation promised, and
    a slow one is the cheapest way for a guest to keep a request in
    flight. Everything is ``None`` where the domain has no block
    statistics.
    """
    count = stats.get('block.count')
    if count is None:
        return None, None, None
    reqs = nbytes = busy = 0
    for i in range(count):
        p = 'block.%d.' % i
        try:
            reqs += stats[p + 'rd.reqs'] + stats[p + 'wr.reqs']
            nbytes += stats[p + 'rd.bytes'] + stats[p + 'wr.bytes']
        except KeyError:
            return None, None, None
        if busy is not None:
            try:
                busy += stats[p + 'rd.times'] + stats[p + 'wr.times']
            except KeyError:
                busy = None
    return reqs, nbytes, busy


def net_packets(stats):
    """Packets received and sent, summed over a domain's interfaces.

    ``None`` where the domain has no interface statistics, or an
    interface lacks a count (a partial sum would read as a drop).
    """
    count = stats.get('net.count')
    if count is None:
        return None
    try:
        return sum(stats['net.%d.rx.pkts' % i] + stats['net.%d.tx.pkts' % i]
                   for i in range(count))
    except KeyError:
        return None


def counters(stats, reservation=model.Reservation()):
    """A domain's :class:`~vsmtio_agent.model.DomainCounters`.

    From its ``getAllDomainStats`` record; ``reservation`` is what MIST
    honours for it (none by default).
    """
    reqs, nbytes, busy = block_totals(stats)
    return model.DomainCounters(io_requests=reqs, io_bytes=nbytes,
                                reservation=reservation, io_busy_ns=busy,
                                net_packets=net_packets(stats))
