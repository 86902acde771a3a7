"""Options of the ``[vsmtio_agent]`` group: the policy engine and its loop."""

from oslo_config import cfg

from vsmtio_agent.conf import types


def new_group():
    """A fresh ``[vsmtio_agent]`` group for one ConfigOpts.

    ``ConfigOpts.register_group`` copies a group shallowly, so ConfigOpts
    objects registered with one shared group share its options' overrides
    (the simulator builds one per run: a kernel's overrides would leak
    into the next run).
    """
    return cfg.OptGroup(
        'vsmtio_agent',
        title='vSMT-IO agent options',
        help='The per-host vsmtio agent: its host driver, its period and '
             'the parameters of the vSMT-IO policies (LTCR, RASS, Workload '
             'Adjuster, the guard) it runs each period.')


agent_group = new_group()

driver_opts = [
    cfg.StrOpt('host_driver',
               help='The host driver, by its name in the '
                    '``vsmtio_agent.host_drivers`` entry point namespace: '
                    '``libvirt`` drives this compute host\'s KVM guests, '
                    '``simulated`` the embedded simulated SMT host. No '
                    'default: ``vsmtio-agent`` refuses to start without '
                    'one, so that a compute host whose operator forgot it '
                    'does not run an agent that manages nothing.'),
    cfg.FloatOpt('period',
                 default=0.1, min=0.01, max=60.0,
                 help='Seconds between two policy periods (``P`` in the '
                      'paper\'s Algorithm 1). Each period the agent samples '
                      'every vCPU, adjusts the retention timeout, '
                      're-classifies vCPUs and may swap two of them. The '
                      'default is what the policy needs. Not shorter: a '
                      'period\'s rates must span many retentions and '
                      'requests (at 0.1 s at least 20 of the longest '
                      'timeout, ``max_timeout_us``, and two idle entries '
                      'at ``guard_io_halt_rate``), and the agent\'s own CPU '
                      'time grows with the rate of periods. Not longer: '
                      'the guard\'s probe lasts at least '
                      '2 x ``guard_probe_pairs`` periods (1.6 s at 0.1 s) '
                      'and MIST acts after ``mist_act_periods`` (0.3 s), '
                      'so longer periods judge across more changes of '
                      'workload and react later.'),
    cfg.BoolOpt('dry_run',
                default=False,
                help='Observe and log decisions without applying them.'),
]

ltcr_opts = [
    cfg.IntOpt('reschedule_cost_us',
               default=50, min=1, max=100000,
               help='Microseconds it costs to deschedule and then '
                    'reschedule a vCPU on this host (VM exit, context '
                    'switch, L1D flush, IPI). The retention timeout never '
                    'starts below it: a retention that short is always '
                    'cheaper than the switch it avoids (paper §4.2). With '
                    'the guard it is where each VM\'s timeout search '
                    'starts, on a ladder of doubling steps between '
                    '``min_timeout_us`` and ``max_timeout_us``.'),
    cfg.IntOpt('initial_timeout_us',
               default=200, min=1, max=1000000,
               help='Initial context-retention timeout in microseconds '
                    'of LTCR\'s Algorithm 1 (the guard off). The effective '
                    'initial value is the larger of this and '
                    '``reschedule_cost_us``.'),
    cfg.IntOpt('min_timeout_us',
               default=10, min=1, max=1000000,
               help='Lower bound of the retention timeout LTCR or the '
                    'guard\'s search may choose, in microseconds.'),
    cfg.StrOpt('ltcr_measure',
               default='throughput', choices=[
                   ('throughput', 'judge CPU-bound vCPUs by instructions '
                    'retired per second and I/O-bound vCPUs by requests '
                    'served (idle entries per second)'),
                   ('paper', 'the paper\'s Algorithm 1 measures: IPC and '
                    'context retentions per second')],
               help='What LTCR\'s trial of a timeout compares with its '
                    'baseline. IPC cannot see the hyperthread time a '
                    'retention takes from CPU-bound vCPUs, so the paper\'s '
                    'measure can accept longer timeouts while CPU-bound '
                    'throughput falls (doc/source/policy.rst). LTCR runs '
                    'only with the guard off; the guard searches each '
                    'VM\'s timeout itself.'),
    cfg.IntOpt('max_timeout_us',
               default=5000, min=1, max=10000000,
               help='Upper bound of the retention timeout LTCR or the '
                    'guard\'s search may choose, '
                    'in microseconds. Retentions longer than a few '
                    'milliseconds cost their vCPU more timeslice than they '
                    'save (paper §3).'),
]

rass_opts = [
    cfg.FloatOpt('io_min_retention_rate',
                 default=0.005, min=0.0, max=1.0,
                 help='Share of a period a vCPU must spend in context '
                      'retention to be classed I/O-bound. RASS ranks vCPUs '
                      'by retention rate and balances the classes\' '
                      'weights, but a vCPU that barely retains is '
                      'CPU-bound whatever its rank, so that an all-CPU core '
                      'runs its vCPUs on both siblings (paper §4.3.2). '
                      'Keep it low: an I/O-bound vCPU whose waits last '
                      'milliseconds retains only a few percent of a period '
                      'while the timeout is still short.'),
    cfg.FloatOpt('split_share',
                 default=1.0, min=0.0, max=1.0,
                 help='Without the guard: the share of the host\'s cores '
                      'the RASS sibling split covers (those whose I/O-bound '
                      'vCPUs wait longest for a hyperthread; the others '
                      'stay as the host\'s scheduler places them). 1.0 '
                      'is the paper: every core. With the guard on, the '
                      'guard chooses the share itself, widening it from an '
                      'eighth of the cores while the objective holds.'),
    cfg.FloatOpt('idle_switch_threshold',
                 default=10.0, min=0.0, max=1000000.0,
                 help='Voluntary plus involuntary context switches per '
                      'second under which a vCPU counts as nearly idle: '
                      'its MIST interference ratio I_cpu is then not '
                      'computed (it would be noise).'),
    cfg.FloatOpt('adjuster_std_threshold',
                 default=0.1, min=0.0, max=1.0,
                 help='The Workload Adjuster starts when the standard '
                      'deviation of retention rates on some core drops '
                      'below this value: the core has become homogeneous '
                      '(paper §4.4).'),
    cfg.FloatOpt('adjuster_min_mean_gap',
                 default=0.1, min=0.0, max=1.0,
                 help='The adjuster swaps only with a core whose mean '
                      'retention rate differs by at least this much from '
                      'the homogeneous core\'s, so that a host where every '
                      'core is alike (all CPU-bound, say) is left alone.'),
    cfg.IntOpt('adjuster_max_swaps',
               default=1, min=0, max=64,
               help='At most this many vCPU swaps per period. 0 disables '
                    'the Workload Adjuster.'),
    cfg.BoolOpt('fair_share',
                default=True,
                help='Enforce the fairness invariant in RASS: a vCPU that '
                     'computed more than its CFS share of its core (by '
                     'weight) is CPU-bound whatever it retains, so no '
                     'tenant gains CPU beyond its weight, or takes the I/O '
                     'sibling from honest I/O, by shaping its waits. Off '
                     'is the paper\'s RASS.'),
    cfg.StrOpt('trust_domain',
               default='project', choices=[
                   ('any', 'any two vCPUs may be siblings: the paper\'s '
                    'RASS, and what nova does without core scheduling; '
                    'for hosts whose guests all trust each other, or '
                    'CPUs not affected by L1TF/MDS-class flaws'),
                   ('project', 'only vCPUs of VMs of one nova project (a '
                    'VM whose project is not known shares with no other)'),
                   ('vm', 'only vCPUs of one VM')],
               help='Whose vCPUs the agent may put on the hyperthreads of '
                    'one physical core (RASS\'s split and the Workload '
                    'Adjuster\'s swaps). Siblings share the L1 data cache '
                    'and the core\'s buffers, which L1TF- and MDS-class '
                    'flaws let one guest read from the other; RASS pins '
                    'its pairs for many periods, a steadier co-residency '
                    'than the host scheduler\'s. The default, project, '
                    'keeps each tenant\'s vCPUs among its own: the agent '
                    'never makes a cross-tenant pairing nova would not, '
                    'and a tenant with several VMs on a host still gets '
                    'mixed cores. Where the host uses core scheduling '
                    '(libvirt\'s sched_core), the agent never pairs vCPUs '
                    'of different cookies, whatever this says. vCPUs the '
                    'agent leaves to the host run where nova\'s pinning '
                    'lets them: only core scheduling, dedicated CPUs '
                    '(hw:cpu_thread_policy=isolate) or disabling SMT keep '
                    'those apart (doc/source/security.rst).'),
]

guard_opts = [
    cfg.BoolOpt('guard',
                default=True,
                help='Keep each mechanism (context retention for each '
                     'VM, at the timeout the guard searches for it; a '
                     'light serving VM\'s CPU weight; the RASS sibling '
                     'split; borrowing) only where probe periods show '
                     'that every VM keeps its floor (guard_cpu_min for a '
                     'VM that computes, guard_io_min for one that serves) '
                     'and the serving VMs gain. Off applies every '
                     'mechanism always, with one timeout tuned by LTCR\'s '
                     'Algorithm 1, as the paper does.'),
    cfg.StrOpt('guard_procedure',
               default='search', choices=(
                   ('search', 'one search over whole configurations '
                    'against the bare host, anytime-valid per-VM bounds '
                    'and one standing holdout'),),
               deprecated_for_removal=True,
               deprecated_reason='The guard has one procedure, the '
                                 'search; ``rules`` is gone, so the '
                                 'option has nothing left to choose.',
               help='How the guard decides what to keep: only '
                    '``search`` remains (doc/source/policy.rst). A '
                    'configuration that still says ``rules`` is refused '
                    'at start.'),
    cfg.FloatOpt('guard_cpu_min',
                 default=0.97, min=0.5, max=1.5,
                 help='The floor of each VM that computes: a '
                      'configuration is kept only if the instructions its '
                      'vCPUs retire per second with it are shown to be at '
                      'least this share of those on the bare host (the '
                      'lower confidence bound at the floor).'),
    cfg.FloatOpt('guard_io_min',
                 default=1.0, min=0.5, max=1.5,
                 help='The floor of each VM that serves: a '
                      'configuration is kept only if what the VM serves '
                      'per second with it (its block requests and network '
                      'packets) is shown to be at least this share of '
                      'what it serves on the bare host.'),
    cfg.IntOpt('guard_probe_pairs',
               default=8, min=2, max=64,
               help='Pairs of periods with and without a candidate '
                    'configuration compared before it may be kept (they '
                    'run in ABBA order). A candidate still undecided is '
                    'visited again, each visit doubling its pairs, up to '
                    'four times this. More pairs detect smaller effects '
                    'and cost more periods run on the bare host.'),
    cfg.IntOpt('guard_settle_periods',
               default=1, min=0, max=8,
               help='Periods a probe runs, unmeasured, after each switch '
                    'between its configurations (and before a holdout '
                    'period): a change of placement '
                    'or of a VM\'s weight takes effect as the host\'s '
                    'load averages follow it (CFS\'s group shares, a '
                    '32 ms half-life), so the first period after it shows '
                    'only part of its effect, of its costs as of its '
                    'gains. 0 measures every period; each settling period '
                    'lengthens a probe by one period per pair.'),
    cfg.FloatOpt('guard_confidence',
                 default=0.9, min=0.6, max=0.999,
                 help='Confidence of the anytime-valid bounds that '
                      'decide whether a VM keeps its floor and the serving '
                      'VMs gain under a candidate configuration: over a '
                      'whole search, the chance of keeping a configuration '
                      'that misses a floor or the gain is at most one '
                      'minus this, however often the bounds are read and '
                      'however many candidates are opened.'),
    cfg.FloatOpt('guard_io_halt_rate',
                 default=20.0, min=0.0, max=1000000.0,
                 help='Idle entries (or context retentions) per second, '
                      'on average over its vCPUs, from which a VM counts '
                      'as serving when the guard judges it (a request loop '
                      'idles once per request; a computing vCPU never '
                      'does).'),
]


ALL_OPTS = types.finite(driver_opts + ltcr_opts + rass_opts + guard_opts)


def register_opts(conf):
    conf.register_group(new_group())
    conf.register_opts(ALL_OPTS, group=agent_group.name)


def list_opts():
    return {agent_group: ALL_OPTS}
