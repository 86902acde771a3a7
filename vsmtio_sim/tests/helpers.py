"""Tiny simulated hosts for the simulator's tests."""

from vsmtio_agent import model
from vsmtio_sim import engine
from vsmtio_sim import scenario

MS = 1e6
US = 1e3

# No cache refill unless a test asks for one: the tests of other mechanisms
# stay about those mechanisms.
CPU_WL = {'kind': 'cpu', 'cpi': {'base': 0.6, 'miss': 0.4},
          'working_set_kib': 0}


def io_wl(burst_us=20, wait_us=300, dist='const', working_set_kib=0):
    return {'kind': 'io', 'cpi': {'base': 0.9, 'miss': 0.6},
            'working_set_kib': working_set_kib,
            'burst': {'dist': 'const', 'mean_us': burst_us},
            'device': {'dist': dist, 'mean_us': wait_us}}


#: A scenario's ``scheduler:`` for the paper's CFS, where a test checks
#: CFS's own behaviour, whichever scheduler is shipped.
CFS = {'policy': 'cfs'}


def tiny(vms, cores=1, workloads=None, duration=1.0, warmup=0.2, **extra):
    """A validated one- or few-core scenario with explicit placement.

    ``vms`` is ``[(name, workload, [hyperthreads])]``.
    """
    doc = {'name': 'tiny', 'host': {'cores': cores},
           'duration_s': duration, 'warmup_s': warmup,
           'placement': 'explicit',
           'workloads': {'cpu': CPU_WL, 'io': io_wl()},
           'vms': [{'name': n, 'workload': w, 'vcpus': len(t),
                    'threads': list(t)} for n, w, t in vms]}
    doc['workloads'].update(workloads or {})
    doc.update(extra)
    return scenario.from_dict(doc)


def run(sc, kernel, until_s=None, seed=1):
    sim = engine.Simulation(sc, kernel, seed)
    sim.advance_to((until_s or sc.duration_s) * 1e9)
    return sim


def vcpu(sim, vm, index=0):
    return sim.by_ref[model.VcpuRef(vm, index)]


def rass_decision(sim, timeout_ns, io_refs):
    """RASS placements as the policy engine plans them (§4.3.1)."""
    from vsmtio_agent.policy import rass
    placements = {}
    for v in sim.vcpus:
        core = sim.topology.core(v.home.core_id)
        role = model.Role.IO if v.ref in io_refs else model.Role.CPU
        placements[v.ref] = rass.placement(core, role)
    return model.Decision(timeout_ns=int(timeout_ns), placements=placements)
