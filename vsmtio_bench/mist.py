#!/usr/bin/env python3
"""MIST on real qemu guests: I_cpu, the protection, the reserved guest's I/O.

A reserved guest (1 vCPU, 4 KiB O_DIRECT reads from its virtio disk) runs
beside an interfering guest (every vCPU spinning) under an embedded
libvirt (``mist_guests``). Phases, each ``--seconds`` long, the guest's
IOPS measured from the host (libvirt block statistics over the phase):

``solo``         the reserved guest alone, the agent observing (dry run);
                 then its reservation is set (``--reserve-iops``, by
                 default twice the solo rate: short of it interfered
                 with or protected, and served well over the quarter of
                 it ``mist_min_demand_fraction`` asks for)
``interfered``   the interferer running, the agent observing (dry run:
                 it says whether it would protect, and writes nothing)
``protected``    the agent live: measured from the period MIST fired
``restored``     the agent stopped (everything put back), interferer on

``interfered``/``protected`` alternate ``--rounds`` times in ABBA order
(the machine's other load drifts). It prints each
phase and the ratios against ``solo`` and ``interfered`` of the same run,
and checks that the vCPU threads went to SCHED_RR and came back. Where
the host's I/O scheduler has no proportional weights (none, mq-deadline,
kyber: only BFQ has them) libvirt refuses the domain's blkio weight, the
agent protects CPU and interrupts only, and the weight column says
``blkio n/a`` with libvirt's reason under the table.

Run (root): vsmtio-bench mist [--seconds 10] [--rounds 4]
[--rt-threads all|vcpus]
"""

import argparse
import os
import statistics
import time

import fixtures
import libvirt

from vsmtio_agent.policy import mist
from vsmtio_agent.tests.functional import mist_guests

POLICY = {os.SCHED_OTHER: 'OTHER', os.SCHED_RR: 'RR',
          os.SCHED_FIFO: 'FIFO', os.SCHED_BATCH: 'BATCH'}


def run_phase(agent, guest, seconds):
    """Tick ``agent`` for ``seconds``; (IOPS from the host, I_cpu list)."""
    start, t0 = guest.block_reqs(), time.monotonic()
    icpu, fired = [], False
    while time.monotonic() - t0 < seconds:
        decision = agent.tick().decision
        value = mist.vm_i_cpu(
            [st for ref, st in agent.last_stats.items()
             if ref.domain == guest.uuid],
            agent.conf.vsmtio_agent.idle_switch_threshold)
        if value is not None:
            icpu.append(value)
        if decision is not None and guest.uuid in decision.protect:
            fired = True
    iops = (guest.block_reqs() - start) / (time.monotonic() - t0)
    return iops, icpu, fired


def interfered_phase(agent, reader, args):
    observer = agent(True)
    iops, icpu, fired = run_phase(observer, reader, args.seconds)
    observer.stop()
    return ('interfered', iops, icpu, fired, policies(reader))


def protected_phase(agent, reader, args):
    live = agent(False)
    t0, ticks = time.monotonic(), 0
    while reader.uuid not in getattr(live.tick().decision, 'protect', {}):
        ticks += 1
        if time.monotonic() - t0 > 60:
            live.stop()
            raise SystemExit('MIST did not fire in 60 s')
    fire_s = time.monotonic() - t0
    iops, icpu, fired = run_phase(live, reader, args.seconds)
    held = policies(reader)
    live.stop()
    return ('protected', iops, icpu, fired, held,
            'fired after %d periods (%.1f s)' % (ticks + 1, fire_s))


def policies(guest):
    """The vCPU threads' policies and the domain's blkio weight, as text."""
    pid, tids = mist_guests.vcpu_threads(guest)
    names = sorted(POLICY.get(os.sched_getscheduler(t)
                              & ~os.SCHED_RESET_ON_FORK, '?')
                   for t in tids.values())
    return names + ['blkio %s' % blkio_weight(guest)]


# libvirt's reason for a host without block I/O weights, once seen
NO_WEIGHT = []


def blkio_weight(guest):
    """The domain's blkio weight as text; ``n/a`` where the host has none.

    libvirt refuses a running domain's weight where no proportional I/O
    scheduler (BFQ) is loaded (VIR_ERR_OPERATION_INVALID); the reason is
    kept for the report.
    """
    try:
        return '%d' % guest.dom.blkioParameters(0)['weight']
    except libvirt.libvirtError as exc:
        if (exc.get_error_code() != libvirt.VIR_ERR_OPERATION_INVALID
                or not guest.dom.isActive()):
            raise
        if not NO_WEIGHT:
            NO_WEIGHT.append(exc.get_error_message() or str(exc))
        return 'n/a'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--rounds', type=int, default=4)
    parser.add_argument('--reserve-iops', type=int, default=None,
                        help='the reserved guest\'s reservation; default '
                        'twice its solo rate, so it is below it and served '
                        'more than mist_min_demand_fraction of it, and '
                        'I_cpu decides')
    parser.add_argument('--interferer-vcpus', type=int, default=2)
    parser.add_argument('--rt-threads', choices=('all', 'vcpus'),
                        default='all')
    parser.add_argument('--rt-runtime-us', type=int, default=400000)
    args = parser.parse_args(argv)

    with fixtures.TempDir() as tmp, mist_guests.EmbeddedLibvirt() as emb:
        # fixtures: the guests are destroyed on the way out, whatever
        # happens (QEMU outlives an embedded libvirt that is only closed)
        with mist_guests.MistGuest(emb.conn, 'reader') as reader:
            rows, solo = measure(args, emb, tmp.path, reader)
    report(args, rows, solo)


def measure(args, emb, tmp, reader):
    """Every phase's row, and the solo rate."""
    time.sleep(3)

    def agent(dry):
        conf = mist_guests.make_conf(
            emb.uri, tmp, dry_run=dry, mist_rt_threads=args.rt_threads,
            mist_rt_runtime_us=args.rt_runtime_us)
        ag = mist_guests.make_agent(conf)
        if not dry:
            ag.driver.recover()
        ag.tick()
        return ag

    rows = []
    observer = agent(True)
    solo, icpu, _ = run_phase(observer, reader, args.seconds)
    observer.stop()
    rows.append(('solo', solo, icpu, False, policies(reader)))
    if args.reserve_iops is None:
        args.reserve_iops = max(1, int(2 * solo))
    reader.reserve(args.reserve_iops)
    with mist_guests.MistGuest(emb.conn, 'spinner',
                               vcpus=args.interferer_vcpus):
        for n in range(args.rounds):
            # ABBA order: drift in the machine's other load cancels out
            order = (('interfered', 'protected') if n % 2 == 0
                     else ('protected', 'interfered'))
            for phase in order:
                if phase == 'interfered':
                    rows.append(interfered_phase(agent, reader, args))
                else:
                    rows.append(protected_phase(agent, reader, args))
        rows.append(('restored', reader.iops(args.seconds), [], False,
                     policies(reader)))
    return rows, solo


def report(args, rows, solo):
    print('MIST on real qemu (TCG) guests: reservation %d IOPS, '
          '%d-vCPU interferer, %.0f s phases, %d rounds, '
          'period 0.5 s, threshold 0.05, 3 periods to act; real-time: %s '
          'threads, %d us per cgroup per second'
          % (args.reserve_iops, args.interferer_vcpus, args.seconds,
             args.rounds, args.rt_threads, args.rt_runtime_us))
    interfered = [r[1] for r in rows if r[0] == 'interfered']
    base = statistics.mean(interfered)
    fmt = '%-11s %9s %8s %10s %9s %-9s %s'
    print(fmt % ('phase', 'IOPS', '/solo', '/interf.', 'I_cpu', 'protect',
                 'vCPU policy'))
    for row in rows:
        name, iops, icpu, fired, pol = row[:5]
        print(fmt % (name, '%.0f' % iops, '%.2f' % (iops / solo),
                     '%.2f' % (iops / base),
                     '%.3f' % statistics.median(icpu) if icpu else '-',
                     'yes' if fired or name == 'protected' else 'no',
                     ','.join(pol) + ('  ' + row[5] if len(row) > 5
                                      else '')))
    if NO_WEIGHT:
        print('blkio n/a: no block I/O weight on this host (libvirt: %s); '
              'MIST protected CPU and interrupts only' % NO_WEIGHT[0])
    protected = [r[1] for r in rows if r[0] == 'protected']
    print('interfered IOPS per round: %s; protected: %s'
          % (' '.join('%.0f' % v for v in interfered),
             ' '.join('%.0f' % v for v in protected)))
    print('protected / interfered: %.2f (means), %.2f (medians); '
          'protected / solo: %.2f'
          % (statistics.mean(protected) / base,
             statistics.median(protected) / statistics.median(interfered),
             statistics.mean(protected) / solo))


if __name__ == '__main__':
    main()
