"""Options of the ``[vsmtio_agent]`` group: the policy engine and its loop."""

from oslo_config import cfg

agent_group = cfg.OptGroup(
    'vsmtio_agent',
    title='vSMT-IO agent options',
    help='The per-host vsmtio agent: its host driver, its period and the '
         'parameters of the vSMT-IO policies (LTCR, RASS, Workload '
         'Adjuster) it runs each period.')

driver_opts = [
    cfg.StrOpt('host_driver',
               default='simulated',
               help='The host driver, by its name in the '
                    '``vsmtio_agent.host_drivers`` entry point namespace. '
                    '``simulated`` drives the embedded simulated SMT host; '
                    '``libvirt`` drives this compute host\'s KVM guests.'),
    cfg.FloatOpt('period',
                 default=0.1, min=0.01, max=60.0,
                 help='Seconds between two policy periods (``P`` in the '
                      'paper\'s Algorithm 1). Each period the agent samples '
                      'every vCPU, adjusts the retention timeout, '
                      're-classifies vCPUs and may swap two of them.'),
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
                    'cheaper than the switch it avoids (paper §4.2).'),
    cfg.IntOpt('initial_timeout_us',
               default=200, min=1, max=1000000,
               help='Initial context-retention timeout in microseconds. '
                    'The effective initial value is the larger of this and '
                    '``reschedule_cost_us``.'),
    cfg.IntOpt('min_timeout_us',
               default=10, min=1, max=1000000,
               help='Lower bound of the retention timeout LTCR may choose, '
                    'in microseconds.'),
    cfg.IntOpt('max_timeout_us',
               default=5000, min=1, max=10000000,
               help='Upper bound of the retention timeout LTCR may choose, '
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
]


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(driver_opts + ltcr_opts + rass_opts, group=agent_group)


def list_opts():
    return {agent_group: driver_opts + ltcr_opts + rass_opts}
