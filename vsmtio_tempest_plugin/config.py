"""Tempest options of the vsmtio plugin.

``[service_available] vsmtio`` says the cloud runs vsmtio (the devstack
plugin sets it). ``[vsmtio]`` says how tempest reaches the compute host
the way whitebox-tempest-plugin does: a command that runs shell commands
there (``virsh`` for domain XML and pins, ``cat`` for the agent's
checkpoint) and the command lines, run there through it, that stop and
start the agent; tests that need one of them skip, saying which option is
unset.
"""

from oslo_config import cfg

service_option = cfg.BoolOpt('vsmtio',
                             default=False,
                             help='Whether the cloud runs vsmtio (its nova '
                                  'plugin and agents).')

group = cfg.OptGroup(name='vsmtio', title='vsmtio tempest options')

opts = [
    cfg.StrOpt('host_command',
               help='How tempest runs a command on a compute host, the way '
                    'whitebox-tempest-plugin does (tempest imports nothing '
                    'of the host): a command given the command line '
                    '(``virsh ...``, ``cat ...``, the agent\'s stop and '
                    'start commands) as its last argument, which it runs '
                    'on compute host ``{host}`` (nova\'s name of it). '
                    '``sh -c`` where tempest runs on the compute host, '
                    '``sudo sh -c`` where the agent\'s files are root\'s, '
                    '``ssh stack@{host} sudo`` for a remote host. Unset: '
                    'every test that acts on a compute host skips.'),
    cfg.StrOpt('libvirt_uri',
               default='qemu:///system',
               help='libvirt URI that ``virsh`` uses on the compute host '
                    '(through ``host_command``): domain XML and live vCPU '
                    'pins are read with ``virsh dumpxml`` and ``virsh '
                    'vcpupin``.'),
    cfg.BoolOpt('retention_capable',
                default=False,
                help='Whether a compute host advertises '
                     'CUSTOM_VSMTIO_CONTEXT_RETENTION (KVM with the vsmtio '
                     'kernel). False: retention flavors must fail with '
                     'NoValidHost instead of booting without retention.'),
    cfg.StrOpt('agent_stop_command',
               help='Command line that stops the vsmtio agent, run on the '
                    'server\'s compute host through ``host_command`` '
                    '(e.g. ``systemctl stop devstack@vsmtio-agent`` with a '
                    '``host_command`` that runs it as root). Unset: the '
                    'tests that stop the agent skip.'),
    cfg.StrOpt('agent_start_command',
               help='Command line that starts the vsmtio agent again, run '
                    'on the compute host through ``host_command``.'),
    cfg.StrOpt('agent_checkpoint_path',
               help='The agent\'s ``[vsmtio_agent] checkpoint_path`` on '
                    'the compute host, read there through '
                    '``host_command``; the stop test reads what the agent '
                    'changed from it.'),
    cfg.IntOpt('filter_min_classified_vcpus',
               default=16,
               help='The cloud\'s nova.conf ``[vsmtio] '
                    'filter_min_classified_vcpus``: the aggregate override '
                    'test needs the filter to judge a host holding one '
                    'classified vCPU, so it skips above 1.'),
    cfg.StrOpt('measured_class_secret',
               secret=True,
               help='nova\'s root secret (``[vsmtio] measured_class_secret`` '
                    'on the controllers): with it the measured state test '
                    'verifies the signature of the published class with '
                    'the key of the server\'s host, derived from it.'),
    cfg.StrOpt('node_stats_command',
               help='Shell command, run where tempest runs, that prints a '
                    'compute node\'s stats as nova-compute saved them (the '
                    'JSON of ``compute_nodes.stats`` in the cell database, '
                    'for example ``mysql -N -B nova_cell1 -e "SELECT stats '
                    'FROM compute_nodes WHERE host=\'{host}\' AND '
                    'deleted=0"``), ``{host}`` replaced by nova\'s name of '
                    'the host: the host\'s I/O : CPU mix as the scheduler '
                    'reads it. Unset: the tenant edit test skips.'),
    cfg.IntOpt('node_stats_wait',
               default=150, min=10,
               help='Seconds in which nova-compute recounts its node\'s '
                    'mix at least once: more than its resource tracker\'s '
                    'period (``[DEFAULT] update_resources_interval``, 60 s '
                    'when 0).'),
    cfg.IntOpt('publish_timeout',
               default=300,
               help='Seconds to wait for the agent to publish an '
                    'instance\'s measured state (its ``[vsmtio_publish] '
                    'interval`` plus a few periods).'),
    cfg.StrOpt('image_io',
               help='Image whose guest waits for I/O (wakes often, '
                    'computes little). Default: [compute] image_ref.'),
    cfg.StrOpt('fleet_zone',
               help='Availability zone of two or more compute hosts whose '
                    'I/O : CPU mix the fleet tests check (hosts given to '
                    'those tests only). Unset: the fleet tests skip.'),
    cfg.FloatOpt('min_io_fraction',
                 default=0.1, min=0.0, max=1.0,
                 help='The cloud\'s nova.conf ``[vsmtio] min_io_fraction`` '
                      '(the fleet zone\'s hosts have no aggregate '
                      'override).'),
    cfg.FloatOpt('max_io_fraction',
                 default=0.9, min=0.0, max=1.0,
                 help='The cloud\'s nova.conf ``[vsmtio] max_io_fraction``.'),
    cfg.BoolOpt('watcher',
                default=False,
                help='Whether Watcher (API, decision engine, applier) runs '
                     'with vsmtio\'s goal and strategy installed: the '
                     'audit test repairs a stranded host in the fleet '
                     'zone.'),
    cfg.IntOpt('watcher_audit_timeout',
               default=300,
               help='Seconds to keep auditing until Watcher\'s compute '
                    'model has seen the departures that stranded a host '
                    '(its ``[watcher_cluster_data_model_collectors.'
                    'compute] period`` without nova notifications).'),
    cfg.StrOpt('image_cpu',
               help='Image whose guest computes all the time. Default: '
                    '[compute] image_ref.'),
]
