#!/usr/bin/env python3
"""Benchmark: CPU cost of one agent period on a host with 200 vCPU threads.

The host is real where it can be: 200 real threads on this machine, named
as QEMU names vCPU threads (``CPU <n>/KVM``) inside 10 processes that carry
their domain's ``-uuid`` on the command line, read through procfs by the
libvirt driver; the domains themselves are libvirt ``test:///default``
domains with those UUIDs (20 vCPUs each), so libvirt calls, pinning and
shares are real libvirt API calls. One period = sample, derive, policy
step, apply (the sleep between periods is not counted).

Baselines, in the same process: reading the same counters the way ``ps``
does, scanning every process and thread of the host, in-process with
psutil (``psutil full scan``) and by running ``ps -eLo`` itself.

Reported as CPU time per period (this process and its children) and as a
share of one core at a 1 s period. Run: ``python tools/bench_tick.py``
(pyperf options apply, e.g. ``--fast``).
"""

import atexit
import logging
import os
import resource
import subprocess
import sys
import uuid

import psutil
import pyperf

DOMAINS, VCPUS = 10, 20
CHILD = r'''
import sys, threading, time
with open('/proc/self/comm', 'w') as f:
    f.write('qemu-bench')
def vcpu(i):
    tid = threading.get_native_id()
    with open('/proc/self/task/%d/comm' % tid, 'w') as f:
        f.write('CPU %d/KVM' % i)
    while True:
        time.sleep(0.05)     # a mostly idle vCPU: wakes 20 times a second
for i in range(int(sys.argv[3])):
    threading.Thread(target=vcpu, args=(i,), daemon=True).start()
sys.stdout.write('ready\n'); sys.stdout.flush()
sys.stdin.read()
'''
DOMAIN_XML = """<domain type='test'><name>bench-%s</name><uuid>%s</uuid>
<memory>65536</memory><vcpu>%d</vcpu><os><type>hvm</type></os></domain>"""


def cpu_seconds():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def make_host(tmp):
    """Start the vCPU thread processes and their test-driver domains."""
    import libvirt
    from oslo_config import cfg

    from vsmtio_agent import agent as agent_mod
    from vsmtio_agent.conf import agent as agent_conf
    from vsmtio_agent.conf import host as host_conf
    from vsmtio_agent.drivers import libvirt as libvirt_driver

    # The host's read-only kvm.halt_poll_ns would warn once per worker.
    logging.getLogger('vsmtio_agent').setLevel(logging.ERROR)
    conn = libvirt.open('test:///default')
    procs = []
    for _ in range(DOMAINS):
        dom_uuid = str(uuid.uuid4())
        proc = subprocess.Popen(
            [sys.executable, '-c', CHILD, '-uuid', dom_uuid, str(VCPUS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        procs.append(proc)
        conn.createXML(DOMAIN_XML % (dom_uuid[:8], dom_uuid, VCPUS))
    atexit.register(lambda: [p.kill() for p in procs])
    conf = cfg.ConfigOpts()
    agent_conf.register_opts(conf)
    host_conf.register_opts(conf)
    conf([], project='vsmtio-bench')
    for key, value in (('libvirt_uri', 'test:///default'),
                       ('checkpoint_path', os.path.join(tmp, 'ckpt.json')),
                       ('period', 1.0)):
        conf.set_override(key, value, group='vsmtio_agent')
    driver = libvirt_driver.LibvirtHostDriver(conf)
    driver.interrupt()      # advance() returns at once: no sleep counted
    driver.recover()        # the daemon's first step
    agent = agent_mod.Agent(conf, driver)
    agent.tick()
    agent.tick()
    found = len(driver.vcpu_threads())
    if found != DOMAINS * VCPUS:
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


def timed(func):
    def bench(loops):
        start = cpu_seconds()
        for _ in range(loops):
            func()
        return cpu_seconds() - start
    return bench


def main():
    import tempfile
    runner = pyperf.Runner(processes=2, values=5, warmups=1)
    runner.metadata['description'] = (
        'CPU seconds per agent period, %d vCPU threads' % (DOMAINS * VCPUS))
    args = runner.parse_args()
    tick = None
    if args.worker:     # the host is built where the benchmark runs
        tick = make_host(tempfile.mkdtemp(prefix='vsmtio-bench-')).tick
    results = {}
    for name, func in (('agent period (libvirt driver)', tick),
                       ('psutil full scan', psutil_scan),
                       ('ps -eLo full scan', ps_scan)):
        results[name] = runner.bench_time_func(name, timed(func))
    if args.worker or None in results.values():
        return
    base = results['agent period (libvirt driver)'].mean()
    print()
    print('%-32s %12s %14s %10s' % ('per 1 s period', 'CPU ms', 'core share',
                                    'vs agent'))
    for name, bench in results.items():
        mean = bench.mean()
        print('%-32s %12.2f %13.2f%% %9.1fx'
              % (name, mean * 1e3, mean * 100, mean / base))
    print('(%d vCPU threads in %d domains; %d CPUs; CPU time of this '
          'process and its children)' % (DOMAINS * VCPUS, DOMAINS,
                                         os.cpu_count()))


if __name__ == '__main__':
    main()
