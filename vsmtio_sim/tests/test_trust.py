"""Trust domains on the simulated host: the real agent, two projects.

Two tenants, each with an I/O-bound and a CPU-bound VM, on a host whose
balanced placement puts one tenant's CPU-bound vCPU beside the other's
I/O-bound one on every core. Under ``project`` and ``vm``
no core the agent places ever holds two trust domains' vCPUs; under
``project`` RASS still pairs each tenant's I/O with its own CPU work;
under ``any`` the agent pairs across tenants, as the paper does.
"""

import os
import tempfile

import testtools
import yaml

from vsmtio_agent import agent as agent_mod
from vsmtio_agent import model
from vsmtio_sim import driver as sim_driver
from vsmtio_sim import runner
from vsmtio_sim import scenario
from vsmtio_sim.tests import helpers

SCENARIO = {
    'name': 'two_tenants', 'host': {'cores': 4},
    'duration_s': 2.0, 'warmup_s': 0.2,
    'workloads': {'cpu': helpers.CPU_WL, 'io': helpers.io_wl()},
    # balanced placement: cpu-a then cpu-b on the first siblings of cores
    # 0-3, then io-b and io-a on the second: each core pairs two tenants
    'vms': [
        {'name': 'io-b', 'workload': 'io', 'vcpus': 2, 'project': 'b'},
        {'name': 'io-a', 'workload': 'io', 'vcpus': 2, 'project': 'a'},
        {'name': 'cpu-a', 'workload': 'cpu', 'vcpus': 2, 'project': 'a'},
        {'name': 'cpu-b', 'workload': 'cpu', 'vcpus': 2, 'project': 'b'}],
}
PROJECTS = {vm['name']: vm['project'] for vm in SCENARIO['vms']}


class TestTrustOnSimulatedHost(testtools.TestCase):

    def setUp(self):
        super().setUp()
        fd, self.path = tempfile.mkstemp(suffix='.yaml')
        self.addCleanup(os.unlink, self.path)
        with os.fdopen(fd, 'w') as f:
            yaml.safe_dump(SCENARIO, f)

    def run_agent(self, rule, periods=8):
        """Each period's ``{core: {(vm, role)}}`` of the agent's placing.

        Read from the simulated host: the vCPUs whose home hyperthread
        is on a core the decision split.
        """
        conf = runner.make_conf(self.path, 'vsmtio-paper', overrides={
            ('vsmtio_agent', 'trust_domain'): rule})
        driver = sim_driver.SimulatedHostDriver(conf)
        ag = agent_mod.Agent(conf, driver)
        ag.tick()
        seen = []
        for _ in range(periods):
            decision = ag.tick().decision
            cores = {}
            for v in driver.simulation.vcpus:
                p = decision.placements[v.ref]
                if decision.applies(p):
                    self.assertEqual(p.core_id, v.home.core_id)
                    cores.setdefault(p.core_id, set()).add(
                        (v.ref.domain, p.role))
            seen.append(cores)
        ag.stop()
        return seen

    def test_the_scenarios_projects(self):
        sc = scenario.load(self.path)
        self.assertEqual(PROJECTS, sc.projects)
        # a scenario that names none is one tenant's (its name)
        plain = dict(SCENARIO, vms=[dict(vm) for vm in SCENARIO['vms']])
        for vm in plain['vms']:
            vm.pop('project')
        self.assertEqual({'two_tenants'}, set(
            scenario.from_dict(plain).projects.values()))

    def test_project_keeps_tenants_apart_and_still_mixes(self):
        seen = self.run_agent('project')
        mixed_within = False
        for cores in seen:
            self.assertTrue(cores, 'the agent placed nothing')
            for core, found in cores.items():
                self.assertEqual(1, len({PROJECTS[vm] for vm, _r in found}),
                                 (core, found))
                roles = {role for _vm, role in found}
                mixed_within |= roles == {model.Role.IO, model.Role.CPU}
        # the tenant's own I/O and CPU work still share cores
        self.assertTrue(mixed_within)

    def test_vm_keeps_vms_apart(self):
        for cores in self.run_agent('vm'):
            self.assertTrue(cores, 'the agent placed nothing')
            for core, found in cores.items():
                self.assertEqual(1, len({vm for vm, _r in found}),
                                 (core, found))

    def test_any_pairs_across_tenants(self):
        across = [core for cores in self.run_agent('any')
                  for core, found in cores.items()
                  if len({PROJECTS[vm] for vm, _r in found}) > 1]
        self.assertTrue(across)
