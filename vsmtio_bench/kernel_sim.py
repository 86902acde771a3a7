"""The kernel bench's situations in the simulator, under each scheduler.

Scenarios generated from the parameters the real kernel ran: one core
whose sibling hyperthread stays idle, a server VM of 1 or 4 vCPUs whose
request is a ``const`` burst and a ``const`` device wait, and (unless the
point is the server alone) a spinner VM of one CPU-bound vCPU, every vCPU
on hyperthread 0; the server VM's cgroup weight at ``ratio`` times the
spinner's (``Simulation.set_vm_weights``). Each runs under every
scheduler policy the model offers (:func:`policies`).

The host's own facts set the model's scheduler inputs: CFS's base
latency, minimum and wake-up granularities scaled for the host's CPUs as
the kernel scales them, and its ``HZ``. Processes pay no VM exit and no
L1D flush on entry, so those costs are 0; every other cost is shipped,
or, for the model of this host, the host profile's (:func:`host_costs`).
"""

from vsmtio_bench import kernel_math
from vsmtio_sim import engine
from vsmtio_sim import report
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import schema

#: The field of a scenario's ``scheduler:`` section that names the
#: scheduler policy, once the model offers more than one. THE extension
#: point: where the model names its policies elsewhere, change this line.
POLICY_FIELD = 'policy'

#: The policy the model runs when no field names one (its only one).
DEFAULT_POLICY = 'cfs'

# CFS's unscaled tunables (kernel/sched/fair.c): sched_latency,
# sched_min_granularity, sched_wakeup_granularity, in us
CFS_BASE_US = {'latency_us': 6000, 'min_granularity_us': 750,
               'wakeup_granularity_us': 1000}

# the workloads' CPI stacks do not matter here (the sibling is idle, so
# every vCPU runs at its solo speed); their working sets do: a switch
# makes the incoming vCPU refill what the other evicted. A CPython busy
# loop and its interpreter touch a few tens of KiB: an estimate.
WORKING_SET_KIB = 32
SERVER, SPINNER = 'server', 'spinner'


def policies():
    """``(field, [policy, ...])``: the scheduler policies the model offers.

    The enum of :data:`POLICY_FIELD` in the scenario schema's
    ``scheduler`` section; failing that, any enum there that names
    ``cfs``; failing that (the model has one scheduler), ``(None,
    [DEFAULT_POLICY])``.
    """
    props = schema.SCHEMA['properties']['scheduler'].get('properties', {})
    spec = props.get(POLICY_FIELD) or {}
    if spec.get('enum'):
        return POLICY_FIELD, list(spec['enum'])
    for field, spec in sorted(props.items()):
        enum = spec.get('enum') if isinstance(spec, dict) else None
        if enum and DEFAULT_POLICY in [str(e).lower() for e in enum]:
            return field, list(enum)
    return None, [DEFAULT_POLICY]


def scheduler_inputs(cpus, hz):
    """The ``scheduler:`` overrides for a host of ``cpus`` and ``hz``."""
    scale = kernel_math.cfs_scale(cpus)
    out = {k: v * scale for k, v in CFS_BASE_US.items()}
    if hz:
        out['tick_hz'] = hz
    return out


def host_costs(costs):
    """A host profile's costs as the bench's processes pay them.

    The profile's idle state exits in what a wake-up by the CPU's own
    timer measured beyond a switch, and its IPI is what a wake-up from
    another CPU costs beyond that. The bench's device is that timer, on
    the same CPU: its wake-ups send no IPI, so the model of this host
    charges none (``ipi_ns`` 0), as it charges no VM exit.
    """
    return dict(costs, ipi_ns=0)


def scenario_doc(burst_us, wait_us, threads, spinner=True, policy=None,
                 field=None, sched=None, duration_s=4.0, warmup_s=0.5,
                 spin_us=0.0, working_set_kib=WORKING_SET_KIB, costs=None):
    """The scenario of one point (a dict the scenario loader validates).

    ``spin_us`` > 0: the server spins that long for its completion
    before it blocks (:func:`run_point` with ``spin``). ``costs``: cost
    inputs over the shipped ones (a host profile's, :func:`host_costs`).
    """
    name = 'kbench_b%g_w%g_t%d%s' % (burst_us, wait_us, threads,
                                     '' if spinner else '_alone')
    vms = [{'name': SERVER, 'workload': 'kbench_server', 'vcpus': threads,
            'threads': [0] * threads}]
    if spinner:
        vms.append({'name': SPINNER, 'workload': 'kbench_spinner',
                    'vcpus': 1, 'threads': [0]})
    doc = {
        'name': name.replace('.', '_'),
        'title': 'kernel bench: burst %g us, wait %g us, %d server '
                 'vCPU(s)%s' % (burst_us, wait_us, threads,
                                ' beside a spinner' if spinner else ''),
        'host': {'cores': 1},
        'duration_s': duration_s,
        'warmup_s': warmup_s,
        'placement': 'explicit',
        'workloads': {
            'kbench_server': {
                'kind': 'io', 'working_set_kib': working_set_kib,
                'cpi': {'base': 1.0, 'miss': 0.0},
                'burst': {'dist': 'const', 'mean_us': burst_us},
                'device': {'dist': 'const', 'mean_us': wait_us}},
            'kbench_spinner': {
                'kind': 'cpu', 'working_set_kib': working_set_kib,
                'cpi': {'base': 1.0, 'miss': 0.0}},
        },
        'vms': vms,
        # processes: no VM exit, no L1D flush on entry
        'costs': dict(costs or {}, vm_exit_ns=0, l1d_flush_ns=0),
        'scheduler': dict(sched or {}),
    }
    if spin_us:
        # a fixed spin of spin_us before every block, whatever else is
        # runnable: the enhanced model (it polls beside runnable tasks)
        # with its window started at, kept at and never shrunk from it
        ns = int(spin_us * 1e3)
        doc['haltpoll'] = {'enhanced_max_ns': ns, 'grow_start_ns': ns,
                           'shrink': 1}
    if field is not None and policy is not None:
        doc['scheduler'][field] = policy
    return doc


def run_point(doc, ratio, seed=1, spin=False):
    """Run one generated scenario; the figures the real kernel reports.

    ``ratio`` is the server VM's weight factor (None: the default). The
    enhanced halt-polling kernel model with ``spin`` (the scenario's
    ``haltpoll`` inputs make it a fixed spin), else ``vanilla``.
    """
    sc = scenario_mod.from_dict(doc, source=doc['name'])
    sim = engine.Simulation(sc, 'haltpoll-enhanced' if spin else 'vanilla',
                            seed)
    if ratio is not None:
        sim.set_vm_weights({SERVER: ratio})
    sim.advance_to(sc.warmup_s * 1e9)
    a, ca = sim.totals(), sim.counters()
    sim.advance_to(sc.duration_s * 1e9)
    b, cb = sim.totals(), sim.counters()
    res = report.measure(sim, a, b, 0.0)
    span = b['time'] - a['time']
    run = {}
    for ref, c in cb.items():
        run[ref.domain] = run.get(ref.domain, 0) + (
            c.run_ns - ca[ref].run_ns)
    wl = res['workloads']['kbench_server']
    return {
        'requests_per_s': res['vms'][SERVER]['requests_per_s'],
        'server_cpu': run.get(SERVER, 0) / span,
        'spinner_cpu': (run[SPINNER] / span if SPINNER in run else None),
        # a woken vCPU's time runnable but not running, per request
        'ready_us': wl['per_request_us']['ready'],
        'events': b['events'] - a['events'],
    }
