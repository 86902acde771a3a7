#!/usr/bin/env python3
"""Benchmark: CPU cost of one agent period on a host with 200 vCPU threads.

The host is real where it can be: 200 real threads on this machine, named
as QEMU names vCPU threads (``CPU <n>/KVM``) inside 10 processes, read
through procfs by the libvirt driver; the domains themselves are libvirt
``test:///default`` domains (20 vCPUs each), so libvirt calls, pinning and
shares are real libvirt API calls. The agent adopts a process as a
domain's QEMU only where libvirt's state names it, and the test driver
keeps none: the bench, which started the processes, names them instead
(:class:`StartedHere`), once per domain, outside the periods measured.
One period = sample, derive, policy step, apply. Periods are ``--period``
apart (the agent's default, 0.1 s) as in the daemon; the sleep between
them is not counted, but it is what lets the vCPUs run between two
readings. Each vCPU thread wakes every 50 ms, so
by default every vCPU runs in every period (the procfs reader's worst
case); ``--idle-domains N`` makes N domains' vCPUs wake every 2 s instead.

The agent's period is measured in the same run with each vCPU source
(``vcpu_source``): procfs as configured by default (``status`` and
``stat`` on the slow cadence of ``switch_read_periods``), procfs with
``switch_read_periods = 1`` (switch counts read every period), and
libvirt (its figures only; what the same calls cost ``libvirtd`` on a
compute host is ``vsmtio-bench libvirtd``'s). Baselines, in the same
run: reading the same counters the way ``ps`` does, scanning every process
and thread of the host, in-process with psutil and by running ``ps -eLo``
itself.

Reported as CPU time per period (this process and its children) and as a
share of one core at the agent's period. Run: ``vsmtio-bench tick``
(pyperf options apply, e.g. ``--fast``); ``--phases`` instead times each
phase of the period (sample, derive, step, apply) for each source, and
``--files`` one read of each procfs file of a vCPU thread.
"""

import atexit
import functools
import logging
import os
import resource
import subprocess
import sys
import time
import uuid

import psutil
import pyperf

DOMAINS, VCPUS = 10, 20
CHILD = r'''
import sys, threading, time
with open('/proc/self/comm', 'w') as f:
    f.write('qemu-bench')
wake, kvm = float(sys.argv[4]), sys.argv[5] == 'kvm'
if kvm:     # a VM whose vCPUs run a guest, as QEMU's do (start_host)
    import ctypes, fcntl, mmap, os, struct
    kvm_fd = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
    vm = fcntl.ioctl(kvm_fd, 0xAE01, 0)                 # KVM_CREATE_VM
    mem = mmap.mmap(-1, 0x1000)
    mem[0:4] = bytes([0xe6, 0x10, 0xeb, 0xfc])  # out 0x10, al; jmp -4
    fcntl.ioctl(vm, 0x4020AE46, struct.pack(    # KVM_SET_USER_MEMORY_REGION
        'IIQQQ', 0, 0, 0, 0x1000,
        ctypes.addressof(ctypes.c_char.from_buffer(mem))))
    vcpus = []
    for i in range(int(sys.argv[3])):
        vcpu = fcntl.ioctl(vm, 0xAE41, i)               # KVM_CREATE_VCPU
        sregs = bytearray(312)
        fcntl.ioctl(vcpu, 0x8138AE83, sregs)            # KVM_GET_SREGS
        struct.pack_into('QIH', sregs, 0, 0, 0xffff, 0)     # cs: base 0
        fcntl.ioctl(vcpu, 0x4138AE84, bytes(sregs))     # KVM_SET_SREGS
        regs = bytearray(144)
        struct.pack_into('QQ', regs, 128, 0, 2)         # rip 0, rflags
        fcntl.ioctl(vcpu, 0x4090AE82, bytes(regs))      # KVM_SET_REGS
        vcpus.append(vcpu)
def run(i):
    if kvm:     # enter the guest; its out exits to here at once
        fcntl.ioctl(vcpus[i], 0xAE80, 0)                # KVM_RUN
ran = threading.Barrier(int(sys.argv[3]) + 1)
def vcpu(i):
    tid = threading.get_native_id()
    with open('/proc/self/task/%d/comm' % tid, 'w') as f:
        f.write('CPU %d/KVM' % i)
    run(i)
    ran.wait()
    while True:
        time.sleep(wake)     # a mostly idle vCPU that wakes now and then
        run(i)
for i in range(int(sys.argv[3])):
    threading.Thread(target=vcpu, args=(i,), daemon=True).start()
ran.wait()
sys.stdout.write('ready\n'); sys.stdout.flush()
sys.stdin.read()
'''
DOMAIN_XML = """<domain type='%s'><name>bench-%s</name><uuid>%s</uuid>
<memory>65536</memory><vcpu>%d</vcpu><os><type>hvm</type></os>
<seclabel type='static' model='dac' relabel='no'><label>+%d:+%d</label>
</seclabel></domain>"""
BUSY_WAKE, IDLE_WAKE = 0.05, 2.0
_KEEP = []
_PIDS = {}      # domain UUID -> the pid of the process standing for it


def cpu_seconds():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


# name: (vcpu_source, switch_read_periods); None: the default.
SOURCES = {
    'procfs': ('procfs', None),
    'procfs, status every period': ('procfs', 1),
    'libvirt': ('libvirt', None),
}
# The agent's budget: CPU ms per period of 0.1 s for 200 vCPUs.
TARGET_MS = 5.0


def start_host(idle_domains=0, kvm=False):
    """Start the vCPU thread processes and their test-driver domains.

    ``kvm``: the domains are of type kvm and each process holds a KVM VM
    with a KVM vCPU per vCPU thread (``/dev/kvm``), so the agent reads
    KVM's statistics of each vCPU as on a kvm host, from libvirt's vCPU
    group (test:///'s).
    Each vCPU thread enters its guest (``KVM_RUN``) at each wake-up, as a
    QEMU vCPU thread runs its vCPU: the guest is a real-mode loop whose
    ``out`` to a port exits to user space at once, so KVM_RUN returns and
    the thread sleeps again. What it models is a mostly idle vCPU whose
    thread runs KVM_RUN now and then (so that KVM knows its thread,
    ``kvm_vcpu.pid``, as it does QEMU's once a guest runs), not a guest's
    work: an exit per wake-up, none of a guest's own halts or timers (the
    halt statistics stay at zero). Every vCPU has run before the host is
    ready.
    """
    kind = 'kvm' if kvm else 'test'
    import libvirt

    conn = libvirt.open('test:///default')
    # test:///default starts with a domain of its own ("test", 2 vCPUs)
    # that no process stands for: the host is the 200 vCPUs below alone
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
        dom.destroy()
    procs = []
    for n in range(DOMAINS):
        dom_uuid = str(uuid.uuid4())
        wake = IDLE_WAKE if n < idle_domains else BUSY_WAKE
        proc = subprocess.Popen(
            [sys.executable, '-c', CHILD, '-uuid', dom_uuid, str(VCPUS),
             str(wake), kind],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        procs.append(proc)
        _PIDS[dom_uuid] = proc.pid
        conn.createXML(DOMAIN_XML % (kind, dom_uuid[:8], dom_uuid, VCPUS,
                                     os.geteuid(), os.getegid()))
    atexit.register(lambda: [p.kill() for p in procs])
    # test:///default's domains live as long as a connection to it does.
    _KEEP.append(conn)
    return procs


class StartedHere:
    """The bench's processes as the domains' QEMU, named by the bench.

    What libvirt's pid files and cgroups are to the agent on a compute
    host (:mod:`vsmtio_agent.drivers.libvirt.qemu_identity`): test:///
    has neither, and the bench started the processes itself.
    """

    def __init__(self, pids):
        self.pids = pids

    def find(self, uuid, name, dom_id, uid):
        from vsmtio_agent.drivers.libvirt import qemu_identity

        pid = self.pids.get(uuid)
        return qemu_identity.Found(pid, 'started by the bench' if pid
                                   else 'not started by the bench')

    def describe(self):
        return 'the processes the bench started'


def make_agent(tmp, source, every=None):
    """The agent with the libvirt driver and the vCPU source asked for.

    ``every``: the driver's ``switch_read_periods`` (None: its default).
    """
    from oslo_config import cfg

    from vsmtio_agent import agent as agent_mod
    from vsmtio_agent.conf import agent as agent_conf
    from vsmtio_agent.conf import host as host_conf
    from vsmtio_agent.drivers import libvirt as libvirt_driver

    # The host's read-only kvm.halt_poll_ns would warn once per worker.
    logging.getLogger('vsmtio_agent').setLevel(logging.ERROR)
    conf = cfg.ConfigOpts()
    agent_conf.register_opts(conf)
    host_conf.register_opts(conf)
    conf([], project='vsmtio-bench')
    for key, value in (('libvirt_uri', 'test:///default'),
                       ('checkpoint_path', os.path.join(tmp, 'ckpt.json')),
                       ('period', 1.0), ('vcpu_source', source)):
        conf.set_override(key, value, group='vsmtio_agent')
    if every is not None:
        conf.set_override('switch_read_periods', every,
                          group='vsmtio_agent')
    driver = libvirt_driver.LibvirtHostDriver(conf)
    driver.domains.qemu = StartedHere(dict(_PIDS))
    driver.interrupt()      # advance() returns at once: no sleep counted
    driver.recover()        # the daemon's first step
    agent = agent_mod.Agent(conf, driver)
    agent.tick()
    agent.tick()
    found = len(driver.vcpu_threads())
    if source == 'procfs' and found != DOMAINS * VCPUS:
        sys.exit('found %d vCPU threads, expected %d'
                 % (found, DOMAINS * VCPUS))
    atexit.register(agent.stop)
    return agent


def psutil_scan():
    """Every thread of every process: comm, switches, last CPU."""
    out = 0
    for proc in psutil.process_iter():
        try:
            for thread in proc.threads():
                try:
                    t = psutil.Process(thread.id)
                    with t.oneshot():
                        t.name()
                        t.num_ctx_switches()
                        t.cpu_num()
                    out += 1
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
    return out


def ps_scan():
    return subprocess.run(['ps', '-eLo', 'tid,comm,nvcsw,nivcsw,psr,time'],
                          capture_output=True, check=True).stdout


def timed(setup, period):
    """A pyperf time function: CPU seconds of ``loops`` periods.

    ``setup`` returns the function to run each period; it is called once
    per worker, before any timing.
    """
    state = {}

    def bench(loops):
        if 'func' not in state:
            state['func'] = setup()
        func = state['func']
        spent = 0.0
        for _ in range(loops):
            time.sleep(period)
            start = cpu_seconds()
            func()
            spent += cpu_seconds() - start
        return spent
    return bench


def phases(args):
    """CPU ms of each phase of the period, for each source.

    The sources' agents share the host and take turns, one period each,
    so that a load that drifts during the run (a shared machine) weighs on
    each alike.
    """
    import tempfile

    from vsmtio_agent.policy import monitor

    start_host(args.idle_domains, args.kvm)
    agents = {name: make_agent(tempfile.mkdtemp(prefix='vsmtio-bench-'),
                               source, every)
              for name, (source, every) in SOURCES.items()}
    spent = {name: [0.0] * 4 for name in agents}
    reading = {name: [0.0] for name in agents}
    for name, agent in agents.items():
        # the source's reading of each domain, timed inside sampling
        source = agent.driver.sampler.source
        source.read = _timed_call(source.read, reading[name])
    last = {name: agent.driver.sample() for name, agent in agents.items()}
    last_stats = {name: {} for name in agents}
    for _ in range(args.periods):
        for name, agent in agents.items():
            driver = agent.driver
            time.sleep(args.period)
            t0 = time.process_time()
            snap = driver.sample()
            t1 = time.process_time()
            stats = monitor.derive(last[name], snap,
                                   agent._idle_switch_threshold,
                                   agent.topology, last_stats[name])
            t2 = time.process_time()
            decision = agent.engine.step(stats)
            t3 = time.process_time()
            driver.apply(decision)
            t4 = time.process_time()
            last[name], last_stats[name] = snap, stats
            for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                spent[name][i] += dt
    print('%-32s %8s %8s %8s %8s %8s %8s' % (
        'ms CPU per period', 'sample', '(read)', 'derive', 'step', 'apply',
        'all'))
    for name, agent in agents.items():
        ms = [s / args.periods * 1e3 for s in spent[name]]
        read = reading[name][0] / args.periods * 1e3
        print('%-32s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f'
              % ((name, ms[0], read) + tuple(ms[1:]) + (sum(ms),)))
        agent.stop()
    print('(read: the vCPU source\'s calls, part of sample)')


def _timed_call(func, total):
    """``func``, adding the CPU seconds of each call to ``total[0]``."""
    def call(*args):
        start = time.process_time()
        try:
            return func(*args)
        finally:
            total[0] += time.process_time() - start
    return call


def files(args):
    """CPU us of one ``pread`` of each procfs file of a vCPU thread.

    The kernel's cost of generating the file, plus a Python loop's (the
    ``/dev/null`` line), swept over the 200 threads ``--period`` apart;
    """
    from vsmtio_agent.linux import procfs

    procs = start_host(args.idle_domains)
    tids = [(p.pid, t) for p in procs
            for t in procfs.vcpu_threads(p.pid).values()]
    paths = {name: ['/proc/%d/task/%d/%s' % (pid, tid, name)
                    for pid, tid in tids]
             for name in ('schedstat', 'stat', 'status', 'sched', 'io')}
    paths['/dev/null'] = ['/dev/null'] * len(tids)
    print('%-10s %8s %8s' % ('file', 'us/read', 'bytes'))
    for name, names in paths.items():
        try:
            fds = [os.open(path, os.O_RDONLY) for path in names]
        except OSError as exc:
            print('%-10s %s' % (name, exc))
            continue
        spent = 0.0
        for _ in range(args.periods):
            time.sleep(args.period)
            start = time.process_time()
            for fd in fds:
                os.pread(fd, 4096, 0)
            spent += time.process_time() - start
        print('%-10s %8.2f %8d' % (name, spent / args.periods / len(fds)
                                   * 1e6, len(os.pread(fds[0], 4096, 0))))
        for fd in fds:
            os.close(fd)


def main():
    import tempfile

    def pass_args(cmd, args):
        cmd.extend(('--period', str(args.period),
                    '--idle-domains', str(args.idle_domains)))
        if args.kvm:
            cmd.append('--kvm')

    # pyperf's workers run this module again, not the vsmtio-bench command
    runner = pyperf.Runner(processes=2, values=5, warmups=1,
                           add_cmdline_args=pass_args,
                           program_args=('-m', __spec__.name))
    runner.argparser.add_argument(
        '--period', type=float, default=0.1,
        help='seconds between periods, not counted (default: 0.1, the '
             "agent's default period)")
    runner.argparser.add_argument(
        '--idle-domains', type=int, default=0, choices=range(DOMAINS + 1),
        help='domains whose vCPUs wake every %g s instead of every %g s'
             % (IDLE_WAKE, BUSY_WAKE))
    runner.argparser.add_argument(
        '--kvm', action='store_true',
        help='kvm domains whose processes hold real KVM vCPUs (/dev/kvm): '
             "the agent reads KVM's statistics too, as on a kvm host")
    runner.argparser.add_argument(
        '--phases', action='store_true',
        help='time each phase of the period for each reader, then exit')
    runner.argparser.add_argument(
        '--files', action='store_true',
        help='time one pread of each procfs file of a thread, then exit')
    runner.argparser.add_argument(
        '--periods', type=int, default=100,
        help='periods timed with --phases or --files (default: 100)')
    args = runner.parse_args()
    if args.phases:
        phases(args)
        return
    if args.files:
        files(args)
        return
    runner.metadata['description'] = (
        'CPU seconds per agent period, %d vCPU threads, %d idle domains%s'
        % (DOMAINS * VCPUS, args.idle_domains,
           ', kvm domains' if args.kvm else ''))

    def host(source, every):
        start_host(args.idle_domains, args.kvm)
        return make_agent(tempfile.mkdtemp(prefix='vsmtio-bench-'), source,
                          every).tick

    results = {}
    for name, (source, every) in SOURCES.items():
        name = 'agent period, %s' % name
        results[name] = runner.bench_time_func(
            name, timed(functools.partial(host, source, every),
                        args.period))
    for name, func in (('psutil full scan', psutil_scan),
                       ('ps -eLo full scan', ps_scan)):
        results[name] = runner.bench_time_func(
            name, timed(lambda f=func: f, args.period))
    if args.worker or None in results.values():
        return
    base = results['ps -eLo full scan'].mean()
    print()
    print('%-48s %10s %12s %10s' % ('%g s period' % args.period, 'CPU ms',
                                    'core share', 'vs ps'))
    for name, bench in results.items():
        mean, dev = bench.mean(), bench.stdev()
        print('%-48s %6.2f ±%.2f %11.2f%% %9.1fx'
              % (name, mean * 1e3, dev * 1e3, mean / args.period * 100,
                 mean / base))
    print('(%d vCPU threads in %d %sdomains, %d of them idle; %d CPUs; CPU '
          'time of this process and its children)'
          % (DOMAINS * VCPUS, DOMAINS, 'kvm ' if args.kvm else '',
             args.idle_domains, os.cpu_count()))
    default = results['agent period, procfs'].mean() * 1e3
    target = TARGET_MS * args.period / 0.1
    print('the default agent period: %.2f ms, %s the target of %.1f ms '
          '(%.0f ms per 0.1 s)' % (default, 'within' if default <= target
                                   else 'OVER', target, TARGET_MS))


if __name__ == '__main__':
    main()
