"""The embedded simulated SMT host as a :class:`HostDriver`.

The agent drives it exactly as it drives a real host: ``advance`` runs the
discrete-event simulation for the period instead of sleeping, ``sample``
reads the simulated vCPUs' cumulative counters, ``apply`` hands the
decision (retention timeout, RASS placement, swaps) to the simulated
``vsmtio`` kernel. Under any other kernel model the host has no retention
or RASS knobs and ``apply`` changes nothing, as on a stock host.
"""

import dataclasses
import threading
import time

from vsmtio_agent.drivers import base
from vsmtio_agent import model
from vsmtio_sim import conf as sim_conf
from vsmtio_sim import engine
from vsmtio_sim import host_profile

NS = 1e9


class SimulatedHostDriver(base.HostDriver):

    @classmethod
    def register_opts(cls, conf):
        sim_conf.register_opts(conf)
        return {sim_conf.sim_group.name: sim_conf.sim_opts}

    def __init__(self, conf, simulation=None):
        self.conf = conf
        self.register_opts(conf)
        opts = conf.vsmtio_sim
        if simulation is None:
            sc = host_profile.load_scenario(opts.scenario, opts.profile)
            if opts.scheduler:
                sc = dataclasses.replace(sc, scheduler=dict(
                    sc.scheduler, policy=opts.scheduler))
            simulation = engine.Simulation(sc, opts.kernel, opts.seed)
        self.simulation = simulation
        self._real_time = opts.real_time
        self._deadline = None
        self._wake = threading.Event()
        # The host's own timeout (the scenario's, as a kernel's default);
        # the agent's first decision puts LTCR's initial value in force.
        self._initial_timeout = simulation.timeout_ns
        # whose each VM is (the scenario's projects): the simulated host
        # has no core scheduling
        self._tenancy = {name: model.Tenancy(project=project)
                         for name, project in
                         simulation.scenario.projects.items()}

    def describe(self):
        sim = self.simulation
        caps = ('topology', 'counters', 'vm_weights')
        # a VM's cgroup weight is a stock host's lever: every kernel model
        knobs = {'vm_weights'}
        if sim.kernel.agent:
            caps += ('retention_timeout', 'per_vm_retention',
                     'rass_placement')
            knobs |= {'retention', 'per_vm_retention'}
        return base.HostMode(
            'simulated',
            'simulated SMT host: scenario %s, kernel model %s, %d cores'
            % (sim.scenario.name, sim.kernel.name, sim.scenario.cores),
            capabilities=caps, knobs=frozenset(knobs))

    def topology(self):
        return self.simulation.topology

    def advance(self, seconds):
        sim = self.simulation
        sim.advance_to(sim.now + seconds * NS)
        if self._real_time:
            self._wait_out(seconds)

    def _wait_out(self, seconds):
        """Sleep until the wall clock has caught up with the simulation.

        A host that simulates slower than the clock (a loaded machine)
        does not wait and does not catch up later in a burst: its
        simulated time falls behind, as its figures then say.
        """
        now = time.monotonic()
        self._deadline = max(now, (self._deadline or now) + seconds)
        self._wake.wait(self._deadline - now)

    def interrupt(self):
        self._wake.set()

    def sample(self):
        sim = self.simulation
        return model.Snapshot(int(sim.now), sim.counters(),
                              domains=sim.domain_counters(),
                              tenancy=self._tenancy, core_scheduling=False)

    def apply(self, decision):
        if not self.simulation.kernel.agent:
            # the VMs' weights are a stock host's lever; nothing else is
            weighted = self.simulation.set_vm_weights(decision.weights)
            return base.ApplyResult(
                applied=weighted, unchanged=1 + len(decision.placements),
                messages=('kernel model %s has no vSMT-IO knobs'
                          % self.simulation.kernel.name,))
        changed, unchanged, messages = self.simulation.apply(decision)
        return base.ApplyResult(applied=changed, unchanged=unchanged,
                                failed=len(messages), messages=messages)

    def restore(self):
        # Putting the host's own timeout back is all there is to restore
        # (placements die with the simulation).
        self.simulation.timeout_ns = self._initial_timeout
        self.simulation.vm_timeouts = None
        self.simulation.set_vm_weights({})
