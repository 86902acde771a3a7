"""vCPU threads' scheduler counters in bulk, from a BPF task iterator.

The same :class:`~vsmtio_agent.linux.procfs.ThreadCounters` as
:class:`procfs.ThreadReader <vsmtio_agent.linux.procfs.ThreadReader>`
gives, with the same values (the kernel fields procfs prints:
``taskiter.bpf.c`` lists them), read per QEMU process instead of per
thread and file.

Why: procfs makes the kernel format a text file per thread and file, and
the agent reads three per vCPU. Measured on this machine (Linux 6.18, 2
CPUs, 200 vCPU threads in 10 processes woken every 50 ms, read 0.1 s apart:
``tools/bench_tick.py --files``), one ``pread`` costs 3.4-3.9 us of CPU
for ``schedstat``, 7-8 us for ``stat`` and 15-17 us for ``status`` (1 us
for ``/dev/null``): 26-29 us per vCPU, over 5 ms per period for 200
vCPUs. That is why the procfs reader gates ``status`` and ``stat`` on
``schedstat`` and reads them on a slow cadence (``switch_read_periods``).
A task iterator attached to one process (Linux >= 6.1) walks that
process's threads in the kernel and copies a 48-byte record per thread:
2.4 us per thread for all five counters, their tuples built in C
included, one read per process (15-20 us for a 20-thread process when
read in a tight loop). In the agent's period (``tools/bench_tick.py
--phases``, 200 vCPUs) the reading costs 0.55 ms against 1.7 ms for the
C procfs reader with its gate and cadence and 5.5 ms for the C procfs
reader reading every file every period. So every counter of every vCPU is
read every period: no gate, no cadence (``switches_ns`` is None).

Each read is still three system calls and a seq_file of the kernel's own
(``bpf_iter_create``, ``read``, ``close``), cold in the period: 0.32 to
0.34 ms of the period for the 10 QEMUs of ``tools/bench_tick.py
--phases``. So where it loads (Linux >= 6.13), a BPF syscall program
(``threads.bpf.c``) reads every QEMU's threads, and the KVM vCPU files
:mod:`~vsmtio_agent.linux.kvmstats` reads, in one run a period
(:meth:`TaskIterReader.begin`), into memory the agent maps: 0.13 to 0.15
ms for the same threads, and no descriptor held per QEMU. A process the
run did not read is read with its iterator, as where it does not load.

The program needs the kernel's BTF (``/sys/kernel/btf/vmlinux``), Linux
>= 6.1 and ``CAP_BPF`` with ``CAP_PERFMON`` (or ``CAP_SYS_ADMIN``); it is
built at install time where clang and libbpf are there (``setup.py``).
:func:`thread_reader` picks it where it loads and procfs otherwise, and
says which and why.
"""

import os
import threading
from typing import NamedTuple

from oslo_log import log as logging

from vsmtio_agent.linux import procfs

LOG = logging.getLogger(__name__)

try:
    from vsmtio_agent.linux import _taskiter
except ImportError as exc:      # not built: the procfs reader does the same
    _taskiter = None
    _NOT_BUILT = str(exc)

KINDS = ('auto', 'bpf', 'procfs')


class Unavailable(Exception):
    """The BPF reader cannot be used here; the message says why."""


class Shape(NamedTuple):
    """A tuple that holds a thread's counters among other items.

    What :meth:`TaskIterReader.read_many` builds per thread when asked
    for it: ``template`` (a named tuple) with the five counters the
    kernel gives (:class:`procfs.ThreadCounters`' fields up to ``cpu``)
    at the places of the fields of the same names. Why: the libvirt
    driver's sampler builds a vCPU's counters from its thread's alone on
    most hosts (no KVM statistics, no perf), which is otherwise a Python
    call per vCPU per period. The template's ``switches_ns``, if it has
    one, stays as it is: this reader reads every counter now (None).
    """

    type: type
    template: tuple
    places: tuple

    @classmethod
    def of(cls, template):
        """The shape of ``template``, a named tuple with those fields."""
        fields = type(template)._fields
        return cls(type(template), tuple(template),
                   tuple(fields.index(name)
                         for name in procfs.ThreadCounters._fields[:5]))

    def counters(self, item):
        """The :class:`procfs.ThreadCounters` that ``item`` holds."""
        if item is None:
            return None
        return procfs.ThreadCounters(*(item[i] for i in self.places))


class HeldLinks:
    """One iterator link per process, held until released.

    What the two BPF readers (this module's and
    :class:`~vsmtio_agent.linux.kvmstats.KvmStatsReader`) share: a link to
    a process is made at its first reading (:meth:`_link`) and held until
    :meth:`_release`, :meth:`retain` or :meth:`close` releases it. The
    reader sets ``_program`` (a ``_taskiter.Program``) and ``_links``.
    """

    def _link(self, pid):
        """The link held for ``pid``, made now if need be; None if gone."""
        link = self._links.get(pid)
        if link is None:
            try:
                link = self._program.attach(pid)
            except ProcessLookupError:
                return None
            self._links[pid] = link
        return link

    def _release(self, pid):
        """Release the link of ``pid``, if held."""
        link = self._links.pop(pid, None)
        if link is not None:
            self._program.detach(link)

    def _read_without_link(self, pid):
        """``pid`` was read without its link: release one, if held.

        A process the threads program reads was read through a link in
        its first period (its pid not yet known to the run); the link is
        not needed after that.
        """
        if self._links:
            self._release(pid)

    def retain(self, pids):
        """Release the links of every process not in ``pids``."""
        for pid in [p for p in self._links if p not in pids]:
            self._release(pid)

    def close(self):
        """Release every link and the program."""
        self._links.clear()
        self._program.close()

    @property
    def links(self):
        """How many processes have a link held."""
        return len(self._links)


class TaskIterReader(HeldLinks):
    """Reads :class:`~vsmtio_agent.linux.procfs.ThreadCounters` with BPF.

    The interface of :class:`~vsmtio_agent.linux.procfs.ThreadReader` that
    the libvirt driver's sampling uses. One iterator link per QEMU process,
    made at its first reading and held until :meth:`forget`,
    :meth:`retain` or :meth:`close` releases it; each reading is one
    iteration over that process's threads (``_taskiter.Program.read``).
    Raises :class:`Unavailable` if the program does not load or a task
    iterator cannot be attached to a process (this one is tried).
    """

    def __init__(self):
        if _taskiter is None:
            raise Unavailable('the BPF reader (vsmtio_agent.linux._taskiter)'
                              ' was not built: it needs clang and libbpf '
                              '(libbpf-dev) at install time (%s)'
                              % _NOT_BUILT)
        try:
            self._program = _taskiter.Program()
        except OSError as exc:
            raise Unavailable('the BPF task iterator does not load: %s (it '
                              'needs CAP_BPF and CAP_PERFMON, and the '
                              'kernel\'s BTF)' % exc)
        self._read = self._program.read
        self._links = {}    # pid -> link
        self._threads = None
        try:
            self._probe()
        except BaseException:
            self.close()
            raise
        self._threads, self.threads_why = self._threads_program()
        self._take = self._threads.take if self._threads else None

    def _probe(self):
        """Read this thread through a link to this process, or raise.

        Checks what loading cannot: that the kernel iterates one process
        (``bpf_iter_link_info.task.pid``, Linux >= 6.1) and that the ids
        match procfs's (the reader's pid namespace).
        """
        tid = threading.get_native_id()
        try:
            link = self._program.attach(os.getpid())
            try:
                mine = self._read(link, [tid], procfs.ThreadCounters)[0]
            finally:
                self._program.detach(link)
        except OSError as exc:
            raise Unavailable('a BPF task iterator cannot be attached to a '
                              'process: %s (it needs Linux >= 6.1)' % exc)
        if mine is None:
            raise Unavailable('the BPF task iterator did not find this '
                              'thread (%d) in this process' % tid)

    @staticmethod
    def _threads_program():
        """``(the threads program, None)``, or ``(None, why not)``.

        The program that reads every QEMU's threads in one run
        (``threads.bpf.c``): where it loads and finds this thread in this
        process, as procfs numbers it, :meth:`begin` uses it; elsewhere
        each process is read with its own task iterator, as before it.
        """
        try:
            threads = _taskiter.Threads()
        except OSError as exc:
            why = ('the BPF threads program does not load: %s (it needs '
                   'Linux >= 6.13)' % exc)
        else:
            tid = threading.get_native_id()
            try:
                threads.run({os.getpid(): _taskiter.READ_THREADS})
                mine = threads.take(os.getpid(), [tid],
                                    procfs.ThreadCounters)
            except OSError as exc:
                mine, why = None, 'the BPF threads program fails: %s' % exc
            else:
                why = ('the BPF threads program did not find this thread '
                       '(%d) in this process' % tid)
            if mine is not None and mine[0] is not None:
                return threads, None
            threads.close()
        LOG.info('Reading each QEMU\'s threads with a task iterator of its '
                 'own: %s.', why)
        return None, why

    def begin(self, pids, vcpus=()):
        """Read the threads of the processes ``pids`` now, all at once.

        One run of the threads program for a period's QEMUs, instead of
        an iteration per QEMU (``threads.bpf.c`` says why): each
        process's :meth:`read_many` then takes its threads from this
        reading, once (a second reading reads again). The KVM vCPU files
        of the processes ``vcpus`` too, in the same run, for
        :meth:`take_vcpus`. A process it did not read (not found by the
        kernel, or beyond the program's room) is read as without it. No
        threads program, nothing done. If the kernel refuses a run, every
        reading from then on is the iterators', as it says.
        """
        if self._threads is None:
            return
        wants = dict.fromkeys(pids, _taskiter.READ_THREADS)
        for pid in vcpus:
            wants[pid] = wants.get(pid, 0) | _taskiter.READ_VCPUS
        try:
            self._threads.run(wants)
        except OSError as exc:
            LOG.warning('Reading each QEMU\'s threads with a task iterator '
                        'of its own from now on: %s.', exc)
            self._threads.close()
            self._threads, self._take = None, None
            self.threads_why = str(exc)

    def take_vcpus(self, pid):
        """The records of ``pid``'s KVM vCPU files :meth:`begin` read.

        As the kvm iterator's ``read_raw`` gives them (``kvmstats``
        decodes both), once; None if the run did not read them, or there
        was no run.
        """
        if self._threads is None or pid is None:
            return None
        return self._threads.take_vcpus(pid)

    def read_many(self, pid, tids, now_ns=None, every=1, offset=0,
                  shape=None):
        """Counters of the threads ``tids`` of process ``pid``, in order.

        None for a thread that is gone (the caller re-discovers). Every
        counter is read each time: ``now_ns``, ``every`` and ``offset``
        (the procfs reader's slow cadence) are accepted and not needed.
        No thread asked, nothing read (a domain whose process was not
        found has ``pid`` None and no threads). With a :class:`Shape`,
        each thread's counters are in a tuple of that shape, its run time
        and CPU always there (this reader alone offers it). The threads
        of a process :meth:`begin` read are taken from its reading.
        """
        if not tids:
            return []
        shape = (procfs.ThreadCounters,) if shape is None else shape
        if self._take is not None and pid is not None:
            read = self._take(pid, tids, *shape)
            if read is not None:
                self._read_without_link(pid)
                return read
        link = self._link(pid)
        if link is None:
            return [None] * len(tids)
        return self._read(link, tids, *shape)

    def close(self):
        """Release every link, the program and the threads program."""
        if self._threads is not None:
            self._threads.close()
        super().close()

    def read(self, pid, tid, schedstat=True, now_ns=None):
        """Counters of thread ``tid`` of process ``pid``; None if gone."""
        return self.read_many(pid, [tid], now_ns)[0]

    def forget(self, pid, tid=None):
        """Release the link of ``pid``; a thread holds nothing of its own."""
        if tid is None:
            self._release(pid)


def thread_reader(procfs_root='/proc', kind='auto'):
    """The vCPU thread reader to use, saying which and why (once).

    ``kind`` (the ``thread_reader`` option): ``bpf`` is
    :class:`TaskIterReader` or :class:`Unavailable`; ``procfs`` the
    procfs reader; ``auto`` the BPF reader where it loads and
    ``procfs_root`` is ``/proc`` (the BPF program reads the running
    kernel's threads, not those of a procfs tree elsewhere), the procfs
    reader otherwise. The reader's ``why`` says why it was picked (what
    ``vsmtio-agent check`` reports).
    """
    if kind not in KINDS:
        raise ValueError('thread_reader must be one of %s, not %r'
                         % (', '.join(KINDS), kind))
    if kind == 'procfs':
        why = 'thread_reader = procfs'
    elif os.path.realpath(procfs_root) != '/proc':
        why = ('procfs_root is %s: the BPF reader reads the running '
               'kernel\'s threads' % procfs_root)
        if kind == 'bpf':
            raise Unavailable('thread_reader = bpf, but %s' % why)
    else:
        try:
            reader = TaskIterReader()
        except Unavailable as exc:
            if kind == 'bpf':
                raise Unavailable('thread_reader = bpf, but %s' % exc)
            why = str(exc)
        else:
            LOG.info('Reading vCPU threads\' counters with a BPF task '
                     'iterator (thread_reader = %s).', kind)
            reader.why = 'thread_reader = %s' % kind
            return reader
    LOG.info('Reading vCPU threads\' counters from procfs: %s.', why)
    reader = procfs.ThreadReader(procfs_root)
    reader.why = why
    return reader
