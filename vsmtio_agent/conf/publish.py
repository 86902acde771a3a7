"""Options of the agent's measured-state publishing (server metadata).

``[vsmtio_publish]`` says whether, how often and with which key;
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
    cfg.StrOpt('measured_class_key',
               secret=True,
               help='This host\'s key, which the measured class is signed '
                    'with: the first of nova-compute\'s ``[vsmtio] '
                    'measured_class_host_keys`` on this host, printed from '
                    'the controllers\' root secret by ``vsmtio-nova-conf '
                    'host-key HOST NOVA_CONF``. It signs for this host '
                    'only: a class it signs counts for no instance of '
                    'another host. Unset (and no '
                    '``measured_class_secret``): the class is not '
                    'published, since nova would ignore an unsigned '
                    'class.'),
    cfg.StrOpt('measured_class_secret',
               secret=True,
               deprecated_for_removal=True,
               deprecated_reason='The root secret lets whoever reads this '
                                 'file sign classes for every host; set '
                                 'measured_class_key (this host\'s own '
                                 'key) instead.',
               help='The controllers\' root secret (nova.conf ``[vsmtio] '
                    'measured_class_secret``): used only where '
                    '``measured_class_key`` is unset, to derive this '
                    'host\'s key from it, with a warning.'),
    cfg.StrOpt('token_scope',
               default='instance',
               choices=[
                   ('instance',
                    'a token scoped to each instance\'s own project '
                    '(nova\'s owner in the domain XML), for a user whose '
                    'only role there is ``vsmtio-agent``, which vsmtio\'s '
                    'nova policy (etc/nova/policy.d/vsmtio.yaml) allows '
                    'the server metadata calls the agent makes and '
                    'nothing else'),
                   ('credentials',
                    'the scope of ``[vsmtio_publish_auth]`` as configured, '
                    'for all instances: nova then lets only an admin '
                    'reach other projects\' servers, so the user must be '
                    'one'),
               ],
               help='Which project the agent\'s token for an instance is '
                    'scoped to. nova finds a server only in the token\'s '
                    'project unless the token is an admin\'s: '
                    '``instance`` needs no admin (doc/source/install.rst '
                    'gives the role and the policy).'),
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
                 'server metadata as. With ``[vsmtio_publish] token_scope '
                 '= instance`` (the default) the agent scopes a token to '
                 'each instance\'s project itself: give the user and its '
                 'domains, not a project; its role there, ``vsmtio-agent``, '
                 'allows the server metadata calls only.'))


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
