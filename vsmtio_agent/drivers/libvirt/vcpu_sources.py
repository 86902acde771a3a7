"""Where each vCPU's scheduler counters come from: procfs or libvirt.

One interface, :class:`VcpuSource`, and two implementations, chosen by
``[vsmtio_agent] vcpu_source``:

``procfs`` (:class:`ProcfsSource`, the default)
    each vCPU thread's own files, held open
    (:class:`~vsmtio_agent.linux.procfs.ThreadReader`): run time and
    run-queue delay in nanoseconds (``schedstat``) every period; the
    context switch counts MIST's I_cpu is built on and the CPU last run
    on (``status``, ``stat``) only for a thread that was switched since
    its last reading, and then on the cadence of ``switch_read_periods``.
``libvirt`` (:class:`LibvirtSource`)
    what libvirt says without the agent reading procfs: run time and
    run-queue delay from ``getAllDomainStats``' vCPU group (the run time
    is the thread's user and system time, in clock ticks), the CPU from
    ``virDomainGetVcpus``; no switch counts, so no I_cpu. For an agent
    that cannot see the host's procfs, at the price of libvirtd reading
    three procfs files per vCPU thread and asking each QEMU over QMP every
    period (``tox -e bench-libvirtd``).

psutil covers neither: it has no ``schedstat`` reader and opens a
thread's files by path on every call. The procfs source reads only
threads of the process libvirt's state names as the domain's QEMU
(:mod:`~vsmtio_agent.drivers.libvirt.qemu_identity`); a domain with none
has libvirt's figures.
"""

import abc

from vsmtio_agent.linux import procfs

NAMES = ('procfs', 'libvirt')
_NOTHING = procfs.ThreadCounters()


class VcpuSource(abc.ABC):
    """The scheduler counters of each running domain's vCPUs."""

    #: whether it needs libvirt's vCPU statistics group of every domain
    vcpu_group = False

    def begin(self, reserved):
        """A new period; ``reserved``: uuids of MIST-reserved domains."""

    @abc.abstractmethod
    def read(self, entry, stats, nvcpus, now_ns):
        """``[ThreadCounters or None]`` of vCPUs ``0..nvcpus-1``.

        ``entry`` is the domain's :class:`~.domains.Domain`, ``stats``
        its ``getAllDomainStats`` record this period (empty where no group
        beyond the state was asked for) and ``now_ns`` the snapshot's
        time. None, or a counter None, where it cannot be had.
        """

    def retain(self, pids):
        """Release what is held for QEMU processes not in ``pids``."""

    def close(self):
        """Release everything held."""

    @abc.abstractmethod
    def describe(self):
        """One line: where the counters come from."""


class LibvirtSource(VcpuSource):
    """Run time, run-queue delay and CPU as libvirt gives them."""

    vcpu_group = True

    def read(self, entry, stats, nvcpus, now_ns):
        # virDomainGetVcpus: (number, state, cpu time, cpu) per vCPU
        infos = {info[0]: info for info in entry.dom.vcpus()[0]}
        out = []
        for index in range(nvcpus):
            prefix = 'vcpu.%d.' % index
            _n, _state, cpu_time, cpu = infos.get(index, (index, None, None,
                                                          None))
            out.append(procfs.ThreadCounters(
                run_ns=stats.get(prefix + 'time', cpu_time),
                runqueue_delay_ns=stats.get(prefix + 'delay'),
                cpu=cpu))
        return out

    def describe(self):
        return ('vCPU run time, run-queue delay and CPU from libvirt '
                '(no switch counts: no I_cpu)')


class ProcfsSource(VcpuSource):
    """Each vCPU thread's procfs files, with the switch-count cadence."""

    def __init__(self, domains, procfs_root, every=1):
        """``every``: switch counts and CPU every this many periods.

        A rotating share of the threads each period
        (:meth:`procfs.ThreadReader.read_many`), but every period for a
        domain with a MIST reservation: MIST's detector and its
        hysteresis count periods of I_cpu, which a late reading would
        shift.
        """
        self.domains = domains
        self.root = procfs_root
        self.every = every
        self.reader = procfs.ThreadReader(procfs_root)
        self._turn = 0          # the cadence's offset this period
        self._position = 0      # threads read so far this period
        self._reserved = frozenset()

    def begin(self, reserved):
        self._turn = (self._turn + 1) % self.every
        self._position = self._turn
        self._reserved = reserved

    def read(self, entry, stats, nvcpus, now_ns):
        tids = self.domains.threads_of(entry, nvcpus)
        found = [index for index in range(nvcpus) if index in tids]
        every = 1 if entry.uuid in self._reserved else self.every
        read = self.reader.read_many(entry.pid, [tids[i] for i in found],
                                     now_ns, every, self._position)
        self._position += len(found)
        if None in read:    # a thread is gone: rediscover
            entry.tids = {}
        out = [None] * nvcpus
        for index, counters in zip(found, read):
            out[index] = counters
        return out

    def retain(self, pids):
        self.reader.retain(pids)

    def close(self):
        self.reader.close()

    def describe(self):
        return ('vCPU threads\' counters from procfs at %s, switch counts '
                'on a cadence of %d periods' % (self.root, self.every))


def complete(counters):
    """Whether a thread's counters have run time, delay and CPU."""
    return (counters is not None and counters.run_ns is not None
            and counters.runqueue_delay_ns is not None
            and counters.cpu is not None)


def with_fallback(counters, fallback):
    """``counters``, with ``fallback``'s run time, delay and CPU.

    Each where ``counters`` lack it (a thread not found, or unreadable).
    """
    if counters is None:
        return fallback
    return counters._replace(
        run_ns=(fallback.run_ns if counters.run_ns is None
                else counters.run_ns),
        runqueue_delay_ns=(fallback.runqueue_delay_ns
                           if counters.runqueue_delay_ns is None
                           else counters.runqueue_delay_ns),
        cpu=fallback.cpu if counters.cpu is None else counters.cpu)
