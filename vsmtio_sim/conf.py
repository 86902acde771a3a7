"""Options of the ``[vsmtio_sim]`` group: the embedded simulated SMT host."""

from oslo_config import cfg

from vsmtio_agent.conf import types


def new_group():
    """A fresh group per ConfigOpts (see ``conf.agent.new_group``)."""
    return cfg.OptGroup(
        'vsmtio_sim',
        title='Simulated SMT host options',
        help='The discrete-event simulated SMT host the agent drives with '
             '``host_driver = simulated``: which scenario it runs and under '
             'which kernel model.')


sim_group = new_group()

sim_opts = types.finite([
    cfg.StrOpt('scenario',
               default='sockperf_matmul',
               help='A scenario: the name of a shipped scenario (see '
                    '``vsmtio-sim list``) or the path of a scenario file.'),
    cfg.StrOpt('kernel',
               default='vsmtio',
               choices=['vanilla', 'polling', 'haltpoll',
                        'haltpoll-enhanced', 'vsmtio-paper', 'vsmtio'],
               help='The host kernel model the simulated host runs.'),
    cfg.IntOpt('seed',
               default=1, min=0, max=2 ** 31 - 1,
               help='Seed of the simulation\'s random numbers; the same '
                    'seed gives the same run.'),
    cfg.FloatOpt('duration',
                 default=0.0, min=0.0, max=3600.0,
                 help='Simulated seconds to run, warm-up included. 0 uses '
                      'the scenario\'s ``duration_s``. Only ``vsmtio-sim`` '
                      'reads it; the agent runs the host period by period.'),
    cfg.StrOpt('scheduler',
               choices=[('cfs', 'Linux 5.3\'s CFS, the paper\'s kernel'),
                        ('eevdf', 'EEVDF, the scheduler of Linux 6.6 and '
                                  'later')],
               help='The host scheduler the model runs, whatever the '
                    'scenario says (unset: the scenario\'s '
                    '``scheduler.policy``). One shipped scenario can so be '
                    'measured under each scheduler the model has.'),
    cfg.BoolOpt('real_time',
                default=False,
                help='Run the simulated host no faster than the wall '
                     'clock: each period waits out what is left of it once '
                     'simulated, as a real host\'s agent sleeps. For an '
                     'agent daemon whose metrics are scraped on the wall '
                     'clock beside real hosts (and which should not take a '
                     'whole core); ``vsmtio-sim`` and the benches run as '
                     'fast as they can.'),
    cfg.StrOpt('profile',
               help='A host profile (JSON) that ``vsmtio-bench calibrate`` '
                    'measured on a host: its ``costs`` and ``scheduler`` '
                    'inputs are laid over the scenario\'s, so the model is '
                    'the model of that host rather than of the paper\'s '
                    'bare-metal one (``[vsmtio_sim] scheduler`` still '
                    'overrides its scheduler policy). Unset: the shipped '
                    'inputs. A profile that is missing, of another version '
                    'or has a bad value is refused before anything runs.'),
])


def register_opts(conf):
    conf.register_group(new_group())
    conf.register_opts(sim_opts, group=sim_group.name)


def list_opts():
    """The ``oslo.config.opts`` entry point for oslo-config-generator."""
    return [(sim_group, sim_opts)]
