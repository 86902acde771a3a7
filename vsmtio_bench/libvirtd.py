#!/usr/bin/env python3
"""Benchmark: what one getAllDomainStats call costs libvirtd and QEMU.

The agent's tick benchmark (``vsmtio-bench tick``) measures the agent's
own process against libvirt's in-process ``test:///`` driver. On a compute
host the agent's one libvirt call per period runs in ``libvirtd`` and, for
some stats groups, in every QEMU: CPU time the tick benchmark cannot see.
This measures it on real domains: a system ``libvirtd`` started as the
functional tests start it (``vsmtio_agent/tests/functional/guest.py``:
root, Debian's libvirt and qemu packages), ``--domains`` transient TCG
domains of ``--vcpus`` vCPUs each (SeaBIOS with nothing to boot: every
vCPU thread exists, none runs a guest), and ``--calls`` calls 20 ms apart
of each stats group the agent has asked for, in the same run, baseline
first and last (the state group alone: the list of running domains), and
of ``listDomainsID``, what the agent calls instead while no domain
starts, stops or restarts.

CPU time is the sum of ``schedstat`` run time over the threads of
``libvirtd``, of the QEMU processes, and this process's own, per call.
KVM's statistics (``query-stats``) exist only for kvm domains, which these
machines cannot boot: on a kvm host the vCPU group costs QEMU and libvirtd
more than here, not less.

Run: ``tox -e bench-libvirtd`` (``-- --domains 2 --vcpus 20``).
"""

import argparse
import glob
import sys
import time
import uuid

import libvirt

from vsmtio_agent.tests.functional import guest

XML = """<domain type='qemu'><name>vsmtio-bench-%s</name><uuid>%s</uuid>
<memory unit='MiB'>128</memory><vcpu placement='static'>%d</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<memballoon model='none'/></devices></domain>"""


def stats(groups):
    """A call of getAllDomainStats with ``groups``, as the agent made it."""
    flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE
    return lambda conn: conn.getAllDomainStats(groups, flags)


CALLS = (
    ('state (baseline)', stats(libvirt.VIR_DOMAIN_STATS_STATE)),
    ('state + vcpu', stats(libvirt.VIR_DOMAIN_STATS_STATE
                           | libvirt.VIR_DOMAIN_STATS_VCPU)),
    # what the agent calls each period while no domain starts or stops
    ('listDomainsID', lambda conn: conn.listDomainsID()),
    ('state (baseline, again)', stats(libvirt.VIR_DOMAIN_STATS_STATE)),
)


def run_ns(pid):
    """CPU ns of every thread of ``pid`` (their schedstat run times)."""
    total = 0
    for path in glob.glob('/proc/%d/task/*/schedstat' % pid):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass    # a thread that ended between the glob and the read
    return total


def measure(conn, daemon_pid, qemu_pids, call, calls):
    """ms of libvirtd, QEMU and this process per ``call(conn)``."""
    call(conn)
    before = (run_ns(daemon_pid), sum(map(run_ns, qemu_pids)),
              time.process_time_ns())
    for _ in range(calls):
        time.sleep(0.02)
        call(conn)
    after = (run_ns(daemon_pid), sum(map(run_ns, qemu_pids)),
             time.process_time_ns())
    return [(b - a) / calls / 1e6 for a, b in zip(before, after)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--domains', type=int, default=2)
    parser.add_argument('--vcpus', type=int, default=20)
    parser.add_argument('--calls', type=int, default=100)
    args = parser.parse_args(argv)
    daemon = guest.LibvirtDaemon()
    try:
        daemon.setUp()
    except guest.Unavailable as exc:
        sys.exit('cannot run: %s' % exc)
    try:
        conn = libvirt.open(guest.URI)
        doms = []
        for _ in range(args.domains):
            dom_uuid = str(uuid.uuid4())
            doms.append(conn.createXML(XML % (dom_uuid[:8], dom_uuid,
                                              args.vcpus)))
        time.sleep(2)
        qemu_pids = []
        for dom in doms:
            with open('/run/libvirt/qemu/%s.pid' % dom.name()) as f:
                qemu_pids.append(int(f.read()))
        print('%d domains x %d vCPUs (TCG), %d calls 20 ms apart; '
              'CPU ms per call' % (args.domains, args.vcpus, args.calls))
        print('%-26s %9s %9s %9s %12s' % ('call', 'libvirtd',
                                          'QEMU', 'caller', 'vs baseline'))
        base = None
        for name, call in CALLS:
            daemon_ms, qemu_ms, own_ms = measure(
                conn, daemon.proc.pid, qemu_pids, call, args.calls)
            total = daemon_ms + qemu_ms + own_ms
            base = base or total
            print('%-26s %9.3f %9.3f %9.3f %11.1fx'
                  % (name, daemon_ms, qemu_ms, own_ms, total / base))
        for dom in doms:
            dom.destroy()
    finally:
        daemon.cleanUp()


if __name__ == '__main__':
    main()
