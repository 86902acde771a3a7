"""Options of the agent's measured-state publishing (server metadata).

``[vsmtio_publish]`` says whether, how often and with which secret;
``[vsmtio_publish_auth]`` holds keystoneauth1's usual options (auth type,
auth URL, user, project, region, endpoint interface) for the compute API.
"""

import socket

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from vsmtio_agent.conf import types
from vsmtio_contract import workload

GROUP = 'vsmtio_publish'
AUTH_GROUP = 'vsmtio_publish_auth'

opts = types.finite([
    cfg.BoolOpt('enabled',
                default=False,
                help='Publish each instance\'s signed measured class as '
                     'server metadata (``vsmtio:measured_class``) through '
                     'the compute API, with the credentials of the '
                     '``[vsmtio_publish_auth]`` group, for the scheduler '
                     'to count. The agent\'s other measurements are in '
                     'its metrics only.'),
    cfg.FloatOpt('interval',
                 default=60.0, min=5.0, max=86400.0,
                 help='Seconds between two rounds for one instance: the '
                      'agent reads back the instance\'s metadata (one '
                      'compute API call) and writes what '
                      'differs from what it measured (a second call), '
                      'repairing a value someone else wrote. Keep it below '
                      'half of ``measured_class_lifetime``.'),
    cfg.StrOpt('measured_class_secret',
               secret=True,
               help='The secret the measured class is signed with: the '
                    'value of nova-compute\'s ``[vsmtio] '
                    'measured_class_secret``. Unset: the class is not '
                    'published, since nova-compute would ignore an '
                    'unsigned class.'),
    cfg.IntOpt('measured_class_lifetime',
               default=3600, min=300, max=workload.MAX_LIFETIME,
               help='Seconds a signed measured class stays valid. The '
                    'signature binds the instance, the class, this host '
                    'and the expiry; nova-compute counts an expired value '
                    'as no measurement, so a value a user puts back stops '
                    'counting at the latest this long after the agent '
                    'wrote it. The agent signs afresh once half of it has '
                    'passed (at its next round). Shorter: a stale or '
                    'replayed class counts for less time; longer: fewer '
                    'writes.'),
    cfg.HostDomainOpt('host',
                      default=socket.gethostname(),
                      sample_default='<hostname>',
                      help='This compute host\'s name as nova knows it '
                           '(nova-compute\'s ``[DEFAULT] host``): the '
                           'measured class is signed for it, and '
                           'nova-compute trusts only a class signed for '
                           'the instance\'s host.'),
    cfg.IntOpt('max_instances',
               default=500, min=1, max=100000,
               help='At most this many instances are published per round '
                    '(the least recently published first), bounding the '
                    'API calls one agent makes.'),
])


def _groups():
    """Fresh groups for each ConfigOpts.

    ``register_group`` copies shallowly: see
    :func:`vsmtio_agent.conf.agent.new_group`.
    """
    return (
        cfg.OptGroup(
            GROUP, title='vsmtio agent: measured state publishing',
            help='The agent publishes each instance\'s signed measured '
                 'class as server metadata, for the scheduler.'),
        cfg.OptGroup(
            AUTH_GROUP, title='vsmtio agent: compute API credentials',
            help='keystoneauth1 options of the user the agent publishes '
                 'server metadata as (it needs the right to update any '
                 'server\'s metadata: an admin or a policy rule for it).'))


def register_opts(conf):
    group, auth_group = _groups()
    conf.register_group(group)
    conf.register_group(auth_group)
    conf.register_opts(opts, group=GROUP)
    ks_loading.register_auth_conf_options(conf, AUTH_GROUP)
    ks_loading.register_session_conf_options(conf, AUTH_GROUP)
    ks_loading.register_adapter_conf_options(conf, AUTH_GROUP)


def list_opts():
    auth = (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + ks_loading.get_adapter_conf_options())
    seen, unique = set(), []
    for opt in auth:
        if opt.dest not in seen:
            seen.add(opt.dest)
            unique.append(opt)
    group, auth_group = _groups()
    return {group: opts, auth_group: unique}
