"""Switching a mechanism off returns the host to vanilla.

Every shipped scenario, scaled to four cores, runs the simulated vSMT-IO
kernel with a mechanism on (retention at 200 us, RASS's split with
borrowing, or both) for 0.3 s, then with everything off; over the next
second (and from 2 to 4 s) every VM must serve what it serves under
vanilla over the same window, drawing the same requests (common random
numbers). The bound is 6% for a VM's mean over the windows: one window of
one VM on these small hosts spreads by a few percent either way once the
runs' queues diverge (about 4% per period for a class), and the
failure it guards against leaves a VM at 0.27x in every window.
"""

import os
import tempfile

import testtools
import yaml

from vsmtio_agent import model
from vsmtio_agent.policy import rass
from vsmtio_sim import engine
from vsmtio_sim import runner
from vsmtio_sim import scenario

ON_S = 0.3
WINDOW_S = (0.6, 1.6)
BOUND = 0.06
OFF = model.Decision(timeout_ns=200000, placements={}, retention=False,
                     split=False, borrow=False)


def kv_store_beside_gamer():
    """Batch VMs, a KV store, a gamer, 8 cores.

    The shipped adversarial host with its I/O VM running DBT-1's loop
    (short request bursts between random disk reads).
    """
    with open(os.path.join(scenario.SCENARIO_DIR,
                           'adversarial_gamer.yaml')) as f:
        doc = yaml.safe_load(f)
    for vm in doc['vms']:
        if vm['workload'] == 'hbase':
            vm['workload'] = 'dbt1'
    return doc


def reduced(name, cores=4):
    """A shipped scenario scaled to ``cores`` (its vCPUs scaled too)."""
    with open(os.path.join(scenario.SCENARIO_DIR, name + '.yaml')) as f:
        doc = yaml.safe_load(f)
    scale = cores / doc['host']['cores']
    doc['host']['cores'] = cores
    for vm in doc['vms']:
        vm['vcpus'] = max(1, int(round(vm['vcpus'] * scale)))
    return scenario.from_dict(doc, source=name)


def served(sim, start_s, end_s):
    """Each VM's served requests (I/O) or instructions over a window."""
    sim.advance_to(start_s * 1e9)
    sim.reseed('window')
    a = sim.totals()
    sim.advance_to(end_s * 1e9)
    b = sim.totals()
    out = {}
    for v in sim.vcpus:
        x, y = a['vcpus'][v.ref], b['vcpus'][v.ref]
        got = (y.requests - x.requests if v.wl.kind == 'io'
               else y.instructions - x.instructions)
        out[v.vm] = out.get(v.vm, 0.0) + got
    return out


def mechanisms_on(sim, retention, split):
    """Retention at 200 us and/or RASS's split (I/O vCPUs by workload)."""
    placements = {}
    for v in sim.vcpus:
        core = sim.topology.core(v.home.core_id)
        role = model.Role.IO if v.wl.does_io else model.Role.CPU
        placements[v.ref] = rass.placement(core, role)
    return model.Decision(timeout_ns=200000, placements=placements,
                          retention=retention, split=split, borrow=split)


class TestSwitchedOffIsVanilla(testtools.TestCase):

    def assertVanilla(self, sc, on, windows=(WINDOW_S,), on_s=ON_S):
        """Each VM's mean ratio over ``windows`` within BOUND of vanilla.

        After a perturbation the two runs' queues diverge, so one window
        of one VM on a small, crowded host (four_per_hyperthread: 4 vCPUs
        a hyperthread) moves by up to about 6% either way; a stranded
        state moves every window the same way. So the mean over the
        windows is held to BOUND, and each window to twice that.
        """
        ratios = {}
        for start, end in windows:
            base = served(engine.Simulation(sc, 'vanilla', 1), start, end)
            sim = engine.Simulation(sc, 'vsmtio', 1)
            sim.apply(on(sim))
            sim.advance_to(on_s * 1e9)
            sim.apply(OFF)
            got = served(sim, start, end)
            for vm, want in base.items():
                ratio = got[vm] / want
                self.assertAlmostEqual(
                    1.0, ratio, delta=2 * BOUND,
                    msg='%s: VM %s after switch-off, window %s-%s s'
                    % (sc.name, vm, start, end))
                ratios.setdefault(vm, []).append(ratio)
        for vm, got in ratios.items():
            self.assertAlmostEqual(
                1.0, sum(got) / len(got), delta=BOUND,
                msg='%s: VM %s after switch-off, mean of %s'
                % (sc.name, vm, got))

    def test_every_shipped_scenario_returns_to_vanilla(self):
        for name in scenario.shipped():
            sc = reduced(name)
            for retention, split in ((True, False), (False, True),
                                     (True, True)):
                self.assertVanilla(
                    sc, lambda sim: mechanisms_on(sim, retention, split),
                    windows=(WINDOW_S, (2.0, 4.0)))

    def test_early_retention_does_not_strand_the_kv_store(self):
        # batch VMs, a KV store (DBT1's loop), a tenant shaping its waits,
        # 8 cores; retention at 200 us for the first 0.1-1 s must not leave
        # the KV store at 0.27x vanilla for the rest of the run
        sc = scenario.from_dict(kv_store_beside_gamer())
        for on_s in (0.1, 0.3, 1.0):
            self.assertVanilla(
                sc, lambda sim: mechanisms_on(sim, True, False),
                windows=((2.0, 3.0),), on_s=on_s)


class TestThroughTheAgent(testtools.TestCase):

    def test_the_guards_probes_leave_no_vm_below_vanilla(self):
        # the guard's first retention probe, dropped, must not leave the
        # KV store at 0.27x vanilla with nothing kept. What the per-VM
        # guard keeps may lift a VM above vanilla (here the KV store, by
        # its own retention); no VM may end below it beyond the noise
        fd, path = tempfile.mkstemp(suffix='.yaml')
        with os.fdopen(fd, 'w') as f:
            yaml.safe_dump(kv_store_beside_gamer(), f)
        self.addCleanup(os.unlink, path)
        r = {k: runner.run(path, k, steady=True)
             for k in ('vanilla', 'vsmtio')}
        for vm, got in r['vsmtio']['vms'].items():
            want = r['vanilla']['vms'][vm]
            key = ('requests_per_s' if got['kind'] == 'io'
                   else 'instructions_per_s')
            self.assertGreaterEqual(got[key] / want[key], 1.0 - BOUND,
                                    msg=vm)


class TestNoHysteresis(testtools.TestCase):
    """Vanilla's CFS with VM cgroups has one steady state, not two."""

    def test_initial_load_does_not_decide_vanilla(self):
        # Linux starts a new task's load average full
        # (init_entity_runnable_average); the model starts it empty. A
        # group's vruntime that does not run at its group weight's rate
        # makes those two starts settle apart, and retention's run time
        # then tips a host from one to the other
        sc = scenario.from_dict(kv_store_beside_gamer())
        results = []
        for load in (0.0, 1.0):
            sim = engine.Simulation(sc, 'vanilla', 1)
            for v in sim.vcpus:
                v.load = load
            for vm, vs in sim.peers.items():
                sim.vm_load[vm] = load * len(vs)
            results.append(served(sim, 2.0, 3.0))
        for vm, want in results[0].items():
            self.assertAlmostEqual(1.0, results[1][vm] / want, delta=BOUND,
                                   msg=vm)
