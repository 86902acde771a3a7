"""Options of the ``[vsmtio_agent]`` group for MIST (I/O protection)."""

from oslo_config import cfg
from oslo_config import types as oslo_types

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import types

# Block devices' interrupt actions as Linux names them: virtio-blk
# ("virtio1-req.0", older "virtio1-requests"), NVMe queues, AHCI/ATA and
# common SAS/RAID HBAs.
BLOCK_IRQ_PATTERN = (r'^(virtio\d+-req(uests|\.\d+)|nvme\d+q\d+|ahci.*|'
                     r'ata_piix|megasas.*|mpt[23]sas.*|aacraid|hpsa.*|'
                     r'smartpqi.*)$')
# NIC queues: virtio-net, and the usual drivers' "<ifname>-TxRx-N" style.
NET_IRQ_PATTERN = (r'^(virtio\d+-(input|output)\.\d+|'
                   r'(eth\d+|en[a-z0-9]+|mlx\d+|mlx5_comp\d+|i40e|ixgbe|'
                   r'ice|bnxt_en|igb|e1000e?)([-_@].*)?)$')

# IRQ numbers are the kernel's descriptors (nr_irqs): far below this on any
# host, so a larger number is a typo.
MAX_IRQ = 1 << 20

detection_opts = [
    cfg.BoolOpt('mist',
                default=True,
                help='Protect VMs that reserved I/O '
                     '(``vsmtio:io_reservation_iops`` or '
                     '``vsmtio:io_reservation_bytes_per_s`` in their '
                     'flavor) from host-side interference, as MIST does: '
                     'while such a VM gets less I/O than it reserved and '
                     'its vCPU threads show CPU interference (I_cpu above '
                     '``mist_icpu_threshold``), its vCPUs run at real-time '
                     'priority (or with boosted cpu shares), its disks get '
                     'a higher block I/O weight, and block and network '
                     'interrupts go to disjoint host CPUs. Everything is '
                     'recorded first and undone when the VM no longer '
                     'needs it, at stop and after a crash. Without '
                     'reserved VMs it changes nothing.'),
    cfg.FloatOpt('mist_icpu_threshold',
                 default=0.05, min=0.0, max=100.0,
                 help='I_cpu (involuntary over voluntary context switches '
                      'of a VM\'s vCPU threads in one period) above which '
                      'the VM counts as interfered with. 0.05 is the '
                      'threshold of the MIST paper. A VM switching fewer '
                      'than ``idle_switch_threshold`` times a second has '
                      'no I_cpu and never counts.'),
    cfg.FloatOpt('mist_min_queue_depth',
                 default=0.05, min=0.001, max=1000.0,
                 help='The I/O demand a reserved VM must show before it '
                      'counts as short of its reservation: the mean '
                      'number of its block requests in flight over a '
                      'period (their summed service time over the '
                      'period). A VM trying to do I/O keeps at least one '
                      'request in flight most of the time, however badly '
                      'it is served; a VM that only computes, or logs now '
                      'and then, stays orders of magnitude below the '
                      'default. Flushes do not count. Without this '
                      'evidence (or where the host has no request times) '
                      'the VM is never protected, so a reservation alone '
                      'cannot make a computing VM real-time. Besides, its '
                      'I/O must be at least ``mist_min_demand_fraction`` '
                      'of its reservation.'),
    cfg.FloatOpt('mist_min_demand_fraction',
                 default=0.25, min=0.05, max=0.95,
                 help='The least share of its reservation a reserved VM '
                      'must be served, on a reserved dimension (IOPS or '
                      'bytes per second, reads and writes; flushes do not '
                      'count), for a shortfall on that dimension to count. '
                      'A VM served less is not denied its reservation but '
                      'not using it: a VM that computes and keeps a '
                      'trickle of I/O going is never protected, whatever '
                      'its I_cpu. The MIST paper\'s protected VM got over '
                      'half its reservation under interference. Lower it '
                      'to protect VMs interfered with more heavily than '
                      'that, at the price of protecting VMs that ask for '
                      'less of what they reserved.'),
    cfg.IntOpt('mist_act_periods',
               default=3, min=1, max=1000,
               help='Consecutive periods a reserved VM must be both below '
                    'its reservation and interfered with before it is '
                    'protected, so that a transient spike does not act.'),
    cfg.IntOpt('mist_clear_periods',
               default=10, min=1, max=100000,
               help='Consecutive periods without both conditions after '
                    'which a protected VM is released (its originals '
                    'written back). Longer than ``mist_act_periods``: '
                    'protection lowers the VM\'s own I_cpu, so the calm it '
                    'sees is partly the protection\'s doing.'),
    cfg.IntOpt('mist_max_clear_periods',
               default=80, min=1, max=1000000,
               help='A VM protected again within its release time after '
                    'a release waits twice as long for the next release, '
                    'up to this many periods, so that a persistent '
                    'interferer does not make the protection flap.'),
]

action_opts = [
    cfg.IntOpt('mist_rt_priority',
               default=1, min=1, max=49,
               help='SCHED_RR priority of a protected VM\'s vCPU threads. '
                    'Low by default: above every normal task, below the '
                    'kernel\'s interrupt threads (50) and watchdogs (99).'),
    cfg.StrOpt('mist_rt_threads',
               default='all', choices=[
                   ('all', 'every thread of the domain\'s QEMU process: '
                    'vCPUs and the emulator and I/O threads that serve '
                    'its disks, as MIST makes the whole VM real-time'),
                   ('vcpus', 'the vCPU threads only')],
               help='Which threads of a protected domain run at real-time '
                    'priority. A guest\'s block I/O is served by QEMU\'s '
                    'emulator and I/O threads: with ``vcpus`` they stay in '
                    'CFS beside the interferer '
                    '(doc/source/benchmarks/mist.rst measures both).'),
    cfg.IntOpt('mist_rt_runtime_us',
               default=400000, min=1000, max=1000000,
               help='The most real-time runtime a protected domain gets '
                    'per real-time period (``cpu.rt_period_us``, 1 s by '
                    'default), on hosts with real-time group scheduling '
                    '(the thread\'s cpu cgroup has ``cpu.rt_runtime_us``). '
                    'Below this ceiling each domain gets what its '
                    'reservation needs (``mist_rt_us_per_request`` and '
                    '``mist_rt_us_per_mib``), at least 1 ms, split evenly '
                    'over its cgroups that hold real-time threads; their '
                    'parents get the sum, which the host caps at '
                    '``kernel.sched_rt_runtime_us`` (a grant beyond it '
                    'fails and that domain gets the cpu shares fallback). '
                    'Never more than the period less '
                    '``mist_rt_min_other_share``. A throttled real-time '
                    'thread waits for the next period instead of falling '
                    'back to CFS.'),
    cfg.FloatOpt('mist_rt_us_per_request',
                 default=100.0, min=1.0, max=100000.0,
                 help='CPU time (µs) a protected domain\'s threads are '
                      'granted at real-time priority for each reserved '
                      'request per second (``vsmtio:io_reservation_iops``)'
                      ': the guest\'s I/O path on its vCPU and QEMU\'s '
                      'submission and completion, with headroom. Used only '
                      'with real-time group scheduling. Size it from the '
                      'host\'s own CPU time per request under load (the '
                      'MIST paper profiles IOPS against runtime); too '
                      'small a budget throttles the VM it protects.'),
    cfg.FloatOpt('mist_rt_us_per_mib',
                 default=1000.0, min=1.0, max=1000000.0,
                 help='CPU time (µs) granted at real-time priority for '
                      'each reserved MiB per second '
                      '(``vsmtio:io_reservation_mib_per_s``), beside '
                      '``mist_rt_us_per_request``. Used only with '
                      'real-time group scheduling.'),
    cfg.FloatOpt('mist_rt_min_other_share',
                 default=0.05, min=0.01, max=0.9,
                 help='The least share of each real-time period that '
                      'real-time threads must leave to normal tasks on '
                      'every CPU. A domain\'s grant never exceeds the '
                      'period less this share, and MIST uses real time '
                      'only where the host-wide '
                      '``kernel.sched_rt_runtime_us`` also leaves at least '
                      'this share (the kernel\'s default, 950000 of '
                      '1000000 us, leaves 5%): a runtime equal to the '
                      'period, or -1, is never accepted. On hosts without '
                      'real-time group scheduling MIST uses no real time '
                      'at all (no budget would be the VM\'s own), only '
                      'the cpu shares fallback.'),
    cfg.FloatOpt('mist_cpu_shares_factor',
                 default=4.0, min=1.0, max=64.0,
                 help='The fallback where the host cannot give a '
                      'protected domain a real-time budget of its own (no '
                      'real-time group scheduling, as on Debian\'s '
                      'kernels; ``vsmtio-agent check`` and ``status`` say '
                      'which a host gets): its cpu shares are '
                      'multiplied by this factor. Proportional sharing '
                      'protects less than real-time scheduling under '
                      'heavy load (the MIST paper, §IV). 1 disables it.'),
    cfg.IntOpt('mist_blkio_weight',
               default=1000, min=100, max=1000,
               help='Block I/O weight (libvirt ``blkiotune``; cgroup v1 '
                    '``blkio.weight``, v2 ``io.weight``) of a protected '
                    'domain. Other domains keep theirs (libvirt\'s default '
                    'is 500 where unset); it takes effect only under a '
                    'proportional I/O scheduler (BFQ).'),
    cfg.BoolOpt('mist_irq_separation',
                default=True,
                help='While a VM is protected, move the interrupts that '
                     'serve its I/O (``mist_irq_scope``) so that block and '
                     'network interrupts go to disjoint host CPUs. Only '
                     'the IRQs moved are recorded and restored, each only '
                     'while it still serves the device it served when '
                     'moved; no other IRQ is touched. While irqbalance '
                     'runs, only the IRQs its command line bans '
                     '(``--banirq``) are moved: irqbalance would move any '
                     'other back within seconds.'),
    cfg.StrOpt('mist_irq_scope',
               default='domain', choices=[
                   ('domain', 'only the interrupts of devices a '
                    'protected domain alone owns: the MSI/MSI-X vectors of '
                    'PCI devices assigned to it (bound to VFIO) and of the '
                    'port under its macvtap in passthrough mode. Never an '
                    'IRQ of a device shared with the host or another '
                    'domain: the disk its image lives on, a bridge\'s '
                    'ports and uplink. A tap or vhost queue has no host '
                    'IRQ'),
                   ('pattern', 'every IRQ whose action names match '
                    '``mist_block_irq_pattern`` or '
                    '``mist_net_irq_pattern``: a configured set, host-wide '
                    'as in the MIST paper\'s evaluation')],
               help='Which interrupts MIST moves while a VM is protected.'),
    cfg.ListOpt('mist_irq_ban',
                item_type=oslo_types.Integer(min=0, max=MAX_IRQ),
                default=[],
                help='IRQ numbers MIST never moves, whatever '
                     '``mist_irq_scope`` finds (e.g. ``24,26``).'),
    cfg.Opt('mist_block_irq_cpus',
            type=types.CpuList(),
            help='Host CPUs (e.g. ``0`` or ``0-1``) that block-device '
                 'interrupts go to while a VM is protected; network '
                 'interrupts get the others. Default: the lowest '
                 'online CPU, as in the MIST paper.'),
    cfg.Opt('mist_block_irq_pattern',
            type=types.Pattern(),
            default=BLOCK_IRQ_PATTERN,
            help='Regular expression matched against each IRQ\'s action '
                 'names in ``/proc/interrupts``: a match is a '
                 'block-device interrupt.'),
    cfg.Opt('mist_net_irq_pattern',
            type=types.Pattern(),
            default=NET_IRQ_PATTERN,
            help='Regular expression matched against each IRQ\'s action '
                 'names in ``/proc/interrupts``: a match is a network '
                 'interrupt. An IRQ matching both patterns is left '
                 'alone.'),
]

ALL_OPTS = types.finite(detection_opts + action_opts)


def register_opts(conf):
    conf.register_group(agent.new_group())
    conf.register_opts(ALL_OPTS, group=agent.agent_group.name)


def list_opts():
    return {agent.agent_group: ALL_OPTS}
