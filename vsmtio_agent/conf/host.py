"""Options of the ``[vsmtio_agent]`` group for real hosts and the daemon."""

from oslo_config import cfg

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import types

libvirt_opts = [
    cfg.StrOpt('libvirt_uri',
               default='qemu:///system',
               help='The libvirt connection URI of the hypervisor whose '
                    'guests the ``libvirt`` host driver observes and '
                    'places; the same URI nova-compute uses.'),
    cfg.FloatOpt('libvirt_retry_initial',
                 default=1.0, min=0.1, max=600.0,
                 help='Seconds before the first attempt to reconnect to '
                      'libvirt after the connection was lost. Each failed '
                      'attempt doubles the wait, up to '
                      '``libvirt_retry_max``; the agent keeps running and '
                      'changes nothing meanwhile.'),
    cfg.FloatOpt('libvirt_retry_max',
                 default=60.0, min=0.1, max=3600.0,
                 help='Upper bound, in seconds, of the wait between two '
                      'libvirt reconnection attempts.'),
    cfg.FloatOpt('io_cpu_shares_factor',
                 default=2.0, min=1.0, max=16.0,
                 help='A domain with an I/O-bound vCPU gets its original '
                      'cpu shares times this factor, so that its vCPUs '
                      'run before co-located CPU-bound vCPUs on the I/O '
                      'sibling (paper §4.3.1). 1 leaves shares alone.'),
]

host_opts = [
    cfg.StrOpt('sysfs_root',
               default='/sys',
               help='Where sysfs is mounted: CPU topology and kernel knobs '
                    'are read below it. Tests point it at a fake tree.'),
    cfg.StrOpt('procfs_root',
               default='/proc',
               help='Where procfs is mounted: vCPU thread counters are '
                    'read below it.'),
    cfg.IntOpt('switch_read_periods',
               default=10, min=1, max=1000,
               help='How often (in periods) the libvirt driver reads each '
                    'vCPU thread\'s context switch counts and last CPU '
                    '(procfs ``status`` and ``stat``: most of the agent\'s '
                    'procfs cost), a rotating share of the threads each '
                    'period. Run time and run-queue delay are read every '
                    'period, and so are the switch counts of a domain with '
                    'a MIST I/O reservation (MIST counts periods of '
                    'evidence). The counts are cumulative, so the I_cpu of '
                    'other vCPUs (status, metrics) is exact over the time '
                    'between two readings, but reflects a change up to '
                    'this many periods late; a thread that did not run '
                    'since its last reading costs nothing either way. 1 '
                    'reads them every period.'),
    cfg.StrOpt('vcpu_source',
               default='procfs', choices=[
                   ('procfs', 'each vCPU thread\'s files below '
                    '``procfs_root``, held open; switch counts on the '
                    'cadence of ``switch_read_periods``'),
                   ('libvirt', 'libvirt\'s vCPU statistics and vCPU info '
                    'only: run time in clock ticks, no context switch '
                    'counts (no I_cpu, so MIST sees no interference); for '
                    'an agent that cannot read the host\'s procfs')],
               help='Where the libvirt driver reads each vCPU\'s '
                    'scheduler counters (run time, run-queue delay, '
                    'context switches, last CPU). KVM\'s halt statistics '
                    'come from libvirt either way.'),
    cfg.BoolOpt('served_stats',
                default=True,
                help='Whether the libvirt driver reads every running '
                     'domain\'s block and interface statistics each period '
                     '(in its one bulk libvirt call): the requests and '
                     'packets a VM serves, what the guard judges a serving '
                     'VM by (a VM\'s idle exits vanish under context '
                     'retention while its I/O goes on). MIST (``mist``) '
                     'needs them too: they are read while either wants '
                     'them. With both off, libvirtd is asked nothing while '
                     'no domain starts or stops, and the guard has no '
                     'measure of served I/O.'),
    cfg.Opt('cpu_dedicated_set',
            type=types.CpuList(),
            help='The CPUs nova-compute\'s ``[compute] '
                 'cpu_dedicated_set`` gives pinned guests (e.g. '
                 '``4-15,^8``). With ``cpu_shared_set`` it bounds where '
                 'the agent may move vCPUs; unset both to allow every '
                 'online CPU.'),
    cfg.Opt('cpu_shared_set',
            type=types.CpuList(),
            help='The CPUs nova-compute\'s ``[compute] cpu_shared_set`` '
                 'gives floating guests, in the same syntax.'),
    cfg.StrOpt('checkpoint_path',
               default='/var/lib/vsmtio/agent-checkpoint.json',
               help='File where the agent records every original value '
                    '(vCPU pinning, cpu shares, kernel knobs) before it '
                    'first changes it, written atomically. The agent '
                    'restores from it on stop and, after a crash, at its '
                    'next start.'),
    cfg.StrOpt('status_path',
               default='/run/vsmtio/agent-status.json',
               help='File the running agent rewrites each period with its '
                    'per-vCPU view; read by ``vsmtio-agent status``.'),
]

metrics_opts = [
    cfg.HostAddressOpt('metrics_bind_host',
                       default='127.0.0.1',
                       help='Address of the OpenMetrics (Prometheus) '
                            'endpoint. Localhost by default, where only '
                            'local processes reach it. Bound to an address '
                            'Prometheus reaches, anyone who reaches that '
                            'address can read the per-VM figures: set '
                            '``metrics_tls_client_ca_file`` (Prometheus '
                            'then needs a client certificate), or keep '
                            'localhost behind a reverse proxy with your '
                            'monitoring\'s access control.'),
    cfg.PortOpt('metrics_port',
                default=9729,
                help='TCP port of the OpenMetrics endpoint; 0 disables it.'),
    cfg.IntOpt('metrics_max_connections',
               default=16, min=1, max=1024,
               help='Connections the metrics endpoint holds open at once. '
                    'A connection costs the agent a descriptor until its '
                    'request has arrived, and one of two threads only '
                    'while it is answered; a new connection beyond this '
                    'closes the oldest one whose request has not arrived '
                    '(or is closed itself while all are being answered). '
                    'A Prometheus server scrapes over one connection at '
                    'a time.'),
    cfg.FloatOpt('metrics_read_timeout',
                 default=5.0, min=0.1, max=60.0,
                 help='Seconds a connection to the metrics endpoint has to '
                      'send its request (with TLS, the handshake '
                      'included), and again to take the answer, before the '
                      'agent closes it. A scrape on a local network needs '
                      'milliseconds.'),
    cfg.StrOpt('metrics_tls_cert_file',
               help='PEM certificate (chain) the metrics endpoint serves '
                    'HTTPS with (TLS 1.2 at least); unset, it serves plain '
                    'HTTP. Read at start, by root.'),
    cfg.StrOpt('metrics_tls_key_file',
               help='PEM private key of ``metrics_tls_cert_file``; unset, '
                    'the key is read from the certificate file.'),
    cfg.StrOpt('metrics_tls_client_ca_file',
               help='PEM CA certificates: with it, the metrics endpoint '
                    'answers only clients that present a certificate one '
                    'of them signed (Prometheus\'s ``tls_config`` '
                    '``cert_file`` and ``key_file``). Needs '
                    '``metrics_tls_cert_file``.'),
    cfg.HostDomainOpt('metrics_host',
                      sample_default='<nova-compute\'s [DEFAULT] host>',
                      help='This compute host\'s name as nova knows it, '
                           'which the metrics carry in their ``fqdn`` '
                           'label: OpenStack Watcher and the dashboard '
                           'join them with nova\'s hosts by it. Unset: '
                           '``[DEFAULT] host`` of ``nova_config_file`` '
                           'where it is readable and set there, else this '
                           'machine\'s host name (nova\'s own default for '
                           'it).'),
    cfg.StrOpt('nova_config_file',
               default='/etc/nova/nova.conf',
               help='nova-compute\'s configuration file on this host, read '
                    '(only its ``[DEFAULT] host``) when ``metrics_host`` '
                    'is unset.'),
]

ALL_OPTS = types.finite(libvirt_opts + host_opts + metrics_opts)


def register_opts(conf):
    conf.register_group(agent.new_group())
    conf.register_opts(ALL_OPTS, group=agent.agent_group.name)


def list_opts():
    return {agent.agent_group: ALL_OPTS}
