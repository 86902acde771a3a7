"""EEVDF (``scheduler.policy: eevdf``): its invariants and a server's lever.

The invariants hold on tiny hosts by construction of the kernel's
algorithm (``kernel/sched/fair.c`` since 6.6): a queue's weighted lags sum
to zero, only an eligible vCPU is picked, weights rescale the shares of
runnable vCPUs, a sleeper keeps its credit and stays queued while in
debt (6.12's delayed dequeue); where several vCPUs of one VM share a
hyperthread, they hold on both levels of its queues
(:mod:`~vsmtio_sim.tests.test_groups`). The lever is the one the product
pulls, a serving VM's cgroup weight beside a CPU-bound VM on one
hyperthread (:func:`pair`); the real kernel shows no cliff in it, and
neither may the model.
"""

import os

import fixtures
import testtools
import yaml

from vsmtio_sim import eevdf
from vsmtio_sim import engine
from vsmtio_sim import runner
from vsmtio_sim.tests import helpers as h

EEVDF = {'policy': 'eevdf'}


def members(sim, th):
    """The vCPUs queued on ``th``: waiting, running unless asleep, delayed."""
    out = list(th.rq) + list(th.delayed)
    c = th.curr if th.curr is not None else th.next
    if c is not None and c.sstate != engine.V_SLEEP and c not in out:
        out.append(c)
    return out


def agent_pair(test, kernel, duration, policy='eevdf'):
    """A 4-vCPU I/O VM and a 4-vCPU CPU-bound one on two cores, run.

    Through ``kernel``'s agent, if it has one, for ``duration`` s, under
    the scheduler ``policy``.
    """
    doc = {'name': 'eevdf_pair', 'host': {'cores': 2},
           'duration_s': duration, 'warmup_s': 0.5,
           'scheduler': {'policy': policy},
           'workloads': {'io': h.io_wl(wait_us=2000, dist='exponential'),
                         'cpu': h.CPU_WL},
           'vms': [{'name': 'io', 'workload': 'io', 'vcpus': 4},
                   {'name': 'cpu', 'workload': 'cpu', 'vcpus': 4}]}
    path = os.path.join(test.useFixture(fixtures.TempDir()).path,
                        'eevdf_pair.yaml')
    with open(path, 'w') as f:
        yaml.safe_dump(doc, f)
    return runner.run(path, kernel, duration=duration)


class TestPolicy(testtools.TestCase):

    def test_eevdf_by_default_cfs_on_request(self):
        # the shipped scheduler is the target hosts' (Linux 6.6 and later)
        vms = [('a', 'cpu', [0])]
        sim = engine.Simulation(h.tiny(vms), 'vanilla')
        self.assertIsInstance(sim, engine.EevdfSimulation)
        self.assertIsInstance(sim, engine.Simulation)
        self.assertEqual('eevdf', sim.scenario.scheduler['policy'])
        self.assertIs(engine.Simulation, type(engine.Simulation(
            h.tiny(vms, scheduler=h.CFS), 'vanilla')))
        # a shipped scenario too, and so the agent's embedded host
        from vsmtio_sim import driver
        conf = runner.make_conf('sockperf_matmul', 'vanilla')
        self.assertIs(engine.EevdfSimulation,
                      type(driver.SimulatedHostDriver(conf).simulation))

    def test_the_run_option_overrides_the_scenarios_scheduler(self):
        # [vsmtio_sim] scheduler: a shipped scenario under either
        from vsmtio_sim import driver
        for want, cls in (('eevdf', engine.EevdfSimulation),
                          ('cfs', engine.Simulation)):
            conf = runner.make_conf('sockperf_matmul', 'vanilla', overrides={
                ('vsmtio_sim', 'scheduler'): want})
            sim = driver.SimulatedHostDriver(conf).simulation
            self.assertIs(cls, type(sim))
            self.assertEqual(want, sim.scenario.scheduler['policy'])
        conf = runner.make_conf('sockperf_matmul', 'vanilla')
        self.assertIsNone(conf.vsmtio_sim.scheduler)
        self.assertRaises(ValueError, conf.set_override, 'scheduler', 'bfs',
                          'vsmtio_sim')

    def test_base_slice_scales_with_the_cpus(self):
        # update_sysctl's factor: 1 + ilog2(min(CPUs, 8))
        self.assertEqual([1, 2, 2, 3, 3, 4, 4],
                         [eevdf.slice_factor(n) for n in (1, 2, 3, 4, 7, 8,
                                                          96)])
        sim = engine.Simulation(h.tiny([('a', 'cpu', [0])],
                                       scheduler=EEVDF), 'vanilla')
        self.assertEqual(1400000.0, sim.base_slice)  # 0.70 ms x 2 CPUs

    def test_every_kernel_model_runs_under_eevdf(self):
        sc = h.tiny([('io', 'io', [0, 1]), ('cpu', 'cpu', [0, 1])],
                    duration=0.3, warmup=0.1, scheduler=EEVDF)
        for kernel in ('vanilla', 'polling', 'haltpoll',
                       'haltpoll-enhanced', 'vsmtio-paper', 'vsmtio'):
            sim = h.run(sc, kernel)
            self.assertGreater(h.vcpu(sim, 'io').requests, 100, kernel)
            self.assertGreater(h.vcpu(sim, 'cpu').instructions, 0, kernel)

    def test_the_agent_drives_the_vsmtio_kernel_under_eevdf(self):
        got = agent_pair(self, 'vsmtio', 2.0)
        self.assertGreater(got['agent']['decisions'], 0)
        self.assertGreater(got['io_throughput'], 0)
        self.assertGreater(got['cpu_throughput'], 0)


class TestInvariants(testtools.TestCase):

    def mixed(self, **extra):
        return h.tiny([('io', 'io', [0]), ('a', 'cpu', [0]),
                       ('b', 'cpu', [0])], scheduler=EEVDF, **extra)

    def test_weighted_lags_sum_to_zero(self):
        sim = engine.Simulation(self.mixed(), 'vanilla', 1)
        sim.set_vm_weights({'a': 3})
        th = sim.threads[0]
        seen = 0
        for k in range(1, 400):
            sim.advance_to(k * 1.7e6)
            queued = members(sim, th)
            if len(queued) < 2:
                continue
            avg = sim._avg(th)
            total = sum((avg - v.vruntime) / v.vr_scale for v in queued)
            self.assertLess(abs(total), 1e-3, k)
            # and each lag is within what update_entity_lag allows
            for v in queued:
                self.assertLess(abs(avg - v.vruntime),
                                2 * sim.tick_ns * v.vr_scale + 1e-3)
            seen += 1
        self.assertGreater(seen, 300)

    def test_only_an_eligible_vcpu_is_switched_in(self):
        sim = engine.Simulation(self.mixed(), 'vanilla', 1)
        sim.set_vm_weights({'io': 2})
        taken = []
        take = sim._take

        def checked(th, v):
            taken.append(v.vruntime <= sim._avg(th) + eevdf.EPS)
            take(th, v)
        sim._take = checked
        sim.advance_to(1e9)
        self.assertGreater(len(taken), 1000)
        self.assertTrue(all(taken))

    def test_weights_rescale_the_shares_of_runnable_vcpus(self):
        for ratio in (1, 1.5, 2, 3, 4):
            sc = h.tiny([('a', 'cpu', [0]), ('b', 'cpu', [0])],
                        duration=2.0, scheduler=EEVDF)
            sim = engine.Simulation(sc, 'vanilla', 1)
            sim.set_vm_weights({'a': ratio})
            sim.advance_to(0.2e9)
            a, b = h.vcpu(sim, 'a'), h.vcpu(sim, 'b')
            start = a.run_ns, b.run_ns
            sim.advance_to(2.0e9)
            ran_a, ran_b = a.run_ns - start[0], b.run_ns - start[1]
            share = ran_a / (ran_a + ran_b)
            want = ratio / (1.0 + ratio)
            self.assertLess(abs(share / want - 1.0), 0.01, (ratio, share))

    def test_a_sleeper_keeps_its_credit_and_gets_no_more(self):
        # a long sleep beside two CPU-bound vCPUs: CFS would place the
        # woken vCPU up to half a latency behind; EEVDF keeps its lag
        sc = h.tiny([('io', 'io', [0]), ('a', 'cpu', [0]),
                     ('b', 'cpu', [0])], scheduler=EEVDF,
                    workloads={'io': h.io_wl(burst_us=3000, wait_us=5000)})
        sim = engine.Simulation(sc, 'vanilla', 1)
        io = h.vcpu(sim, 'io')
        place = sim._place
        kept = []

        def placed(th, v):
            delayed = v.delayed
            place(th, v)
            if v is io and not delayed and members(sim, th):
                kept.append((v.vlag, sim._lag(th, v)))
        sim._place = placed
        sim.advance_to(2e9)
        self.assertGreater(len(kept), 10)
        for before, after in kept:
            self.assertAlmostEqual(before, after, delta=1e-3)
        # a burst longer than a slice sometimes ends in credit: it is kept
        # over the sleep, and the sleep adds none; one that ends in debt
        # stays queued (DELAY_DEQUEUE, TestDelayedDequeue)
        self.assertTrue(all(before >= -eevdf.EPS for before, _ in kept))
        self.assertTrue(any(before > 0 for before, _ in kept))


class TestDelayedDequeue(testtools.TestCase):
    """A sleeper that owes CPU stays queued until its debt is spent."""

    def server(self, burst, wait):
        """An I/O vCPU of ``burst`` / ``wait`` us beside a CPU-bound one."""
        sc = h.tiny([('io', 'io', [0]), ('a', 'cpu', [0])],
                    scheduler=EEVDF,
                    workloads={'io': h.io_wl(burst_us=burst, wait_us=wait)})
        sim = engine.Simulation(sc, 'vanilla', 1)
        return sim, h.vcpu(sim, 'io'), sim.threads[0]

    def wakes(self, sim, io):
        """What ``_place`` did to ``io`` woken while delayed, over 1 s.

        Per wake-up: (vruntime, deadline) before and after, then its lag
        (V as settled now) and its request's vruntime span.
        """
        place = sim._place
        seen = []

        def placed(th, v):
            if v is not io or not v.delayed:
                return place(th, v)
            before = (v.vruntime, v.deadline)
            place(th, v)
            seen.append((before, (v.vruntime, v.deadline),
                         sim._lag(th, v), sim._vslice(v)))
        sim._place = placed
        sim.advance_to(1e9)
        return seen

    def test_a_sleeper_in_debt_stays_queued(self):
        # 3 ms bursts beside a spinner end in debt as often as not: those
        # sleepers stay in the queue (and in V), asleep; the rest leave
        sim, io, th = self.server(3000, 100)
        dequeued = sim._dequeued
        seen = []

        def checked(th, v):
            lag = sim._lag(th, v)
            dequeued(th, v)
            if v is io:
                seen.append((lag, v.delayed, v in th.delayed))
        sim._dequeued = checked
        sim.advance_to(1e9)
        self.assertGreater(len(seen), 100)
        for lag, delayed, listed in seen:
            self.assertEqual(lag < -eevdf.EPS, delayed, lag)
            self.assertEqual(delayed, listed)
        self.assertTrue(any(d for _, d, _ in seen))
        self.assertFalse(all(d for _, d, _ in seen))

    def test_a_short_sleep_keeps_the_rest_of_the_debt(self):
        # woken 100 us later it still owes: it stays where it stood, its
        # deadline kept, until the spinner has run the rest off
        sim, io, th = self.server(3000, 100)
        seen = self.wakes(sim, io)
        self.assertGreater(len(seen), 50)
        for before, after, _, _ in seen:
            self.assertEqual(before, after)
        self.assertFalse(io in th.rq and io.delayed)

    def test_a_long_sleep_spends_the_debt_and_wakes_with_none(self):
        # asleep 5 ms, its debt is run off by the spinner and, once
        # eligible, the next pick takes it off the queue with no lag
        # (DELAY_ZERO): it wakes at V, eligible, with no credit either
        sim, io, th = self.server(3000, 5000)
        undelay, place = sim._undelay, sim._place
        ended, woke = [], []

        def undelayed(th, v):
            lag = sim._lag(th, v)
            undelay(th, v)
            if v is io:
                ended.append((lag, v.vlag))

        def placed(th, v):
            place(th, v)
            if v is io:
                woke.append(sim._lag(th, v))
        sim._undelay, sim._place = undelayed, placed
        sim.advance_to(1e9)
        self.assertGreater(len(ended), 30)
        for lag, kept in ended:
            self.assertGreaterEqual(lag, -eevdf.EPS)
            self.assertEqual(0.0, kept)
        self.assertGreater(len(woke), 50)
        for lag in woke:
            self.assertGreaterEqual(lag, -eevdf.EPS)

    def test_the_debt_is_judged_by_the_last_accounting(self):
        # a 50 us request then a 200 us wait beside a spinner of equal
        # weight: its debt is judged at waking against V as the spinner
        # was last accounted (when the server slept), so it stays where it
        # was, and the spinner's 200 us since make it eligible as soon as
        # the wake-up accounts them: it runs at once and keeps its pace
        req, _, _, ready = pair('eevdf', 50, 200, 1, 1)
        alone = pair('eevdf', 50, 200, 1, 1, alone=True)
        # (alone, a wake-up from idle costs the C-state's exit)
        self.assertLess(ready, alone[3] + 3.0)
        self.assertGreater(req / alone[0], 0.98)


# (burst us, wait us, server threads): the real-kernel bench's profiles
PROFILES = ((50, 200, 1), (50, 200, 4), (20, 900, 1), (20, 900, 4),
            (500, 100, 1), (500, 100, 4))
RATIOS = (1, 1.5, 2, 2.5, 2.75, 3, 4)


def pair(policy, burst, wait, threads, ratio, alone=False, seed=1,
         duration=2.5, warmup=0.5):
    """A server VM beside a spinner VM on one hyperthread.

    The server's vCPUs each loop ``burst`` us of compute and a ``wait`` us
    device wait (``const``); its cgroup weight is ``ratio`` times the
    spinner's. Returns (requests/s, spinner instructions/s, the server's
    share of the hyperthread, its mean ready time per request in us).
    """
    vms = [('srv', 'srv', [0] * threads)]
    if not alone:
        vms.append(('spin', 'cpu', [0]))
    sc = h.tiny(vms, workloads={'srv': h.io_wl(burst_us=burst,
                                               wait_us=wait)},
                duration=duration, warmup=warmup,
                scheduler={'policy': policy})
    sim = engine.Simulation(sc, 'vanilla', seed)
    sim.set_vm_weights({'srv': ratio})
    sim.advance_to(warmup * 1e9)
    srv = sim.peers['srv']
    spin = sim.peers.get('spin', [])

    def count():
        return (sum(v.requests for v in srv),
                sum(v.instructions for v in spin),
                sum(v.run_ns for v in srv),
                sum(v.req_acc[engine.V_READY] for v in srv))
    start = count()
    sim.advance_to(duration * 1e9)
    req, instr, run, ready = (b - a for a, b in zip(start, count()))
    span = duration - warmup
    return (req / span, instr / span, run / (span * 1e9),
            ready / max(req, 1) / 1e3)


def table(policy, ratios=RATIOS, profiles=PROFILES):
    """The model's table: per profile, (server, spinner) ratios to ratio 1.

    ``{profile: {ratio: (server, spinner)}, 'base': {profile: (req/s at
    1, req/s alone)}}``, for comparing with the real kernel's.
    """
    out = {'base': {}}
    for prof in profiles:
        base = pair(policy, *prof, 1)
        alone = pair(policy, *prof, 1, alone=True)
        out['base'][prof] = (base[0], alone[0])
        out[prof] = {}
        for r in ratios:
            got = pair(policy, *prof, r)
            out[prof][r] = (got[0] / base[0], got[1] / base[1])
    return out


class TestServerBesideSpinner(testtools.TestCase):
    """The product's lever under EEVDF: what the algorithm guarantees."""

    def test_a_heavy_server_takes_its_weights_share(self):
        # four 500/100 us threads keep the server VM runnable: it gets
        # r / (1 + r) of the hyperthread, trading 1:1 with the spinner
        for ratio in (1, 2, 3, 4):
            share = pair('eevdf', 500, 100, 4, ratio)[2]
            want = ratio / (1.0 + ratio)
            self.assertLess(abs(share - want), 0.03, (ratio, share))

    def test_a_one_thread_server_waits_burst_over_ratio(self):
        # its burst leaves it in debt, so it sleeps still queued, and the
        # spinner runs that debt off, during the 100 us sleep and then
        # while it waits: about the burst over the weight ratio in all, as
        # the real kernel shows (499, 250, 121 us)
        for ratio in (1, 2, 4):
            ready = pair('eevdf', 500, 100, 1, ratio)[3]
            self.assertLess(abs(ready / (500.0 / ratio) - 1.0), 0.15,
                            (ratio, ready))

    def test_no_cliff_between_two_and_three(self):
        # a const burst beats against the slice and the tick: a step of
        # its own may sit at any one burst (with the server's four vCPUs
        # in one group, at 50 us between x2 and x2.5, at 55 us between
        # x2.5 and x2.75), so the server is taken over bursts a tenth
        # apart, as the real one's vary (the kernel bench's page)
        for burst, wait, threads in ((500, 100, 1), (50, 200, 4)):
            got = [sum(pair('eevdf', burst * f, wait, threads, r,
                            duration=1.5)[0] for f in (0.9, 1.0, 1.1))
                   for r in (2, 2.5, 2.75, 3)]
            for lo, hi in zip(got, got[1:]):
                self.assertGreaterEqual(hi, 0.99 * lo, (burst, got))
                self.assertLess(hi, 1.1 * lo, (burst, got))
