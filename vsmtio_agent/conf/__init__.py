"""oslo.config options of the vsmtio agent."""

from oslo_config import cfg

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import host
from vsmtio_agent.conf import mist
from vsmtio_agent.conf import publish


def register_opts(conf):
    """Register every option of the agent on ``conf``.

    Tests build their own ConfigOpts with it (see
    :func:`vsmtio_agent.conf.agent.new_group` for why not share one).
    """
    for module in (agent, host, mist, publish):
        module.register_opts(conf)


CONF = cfg.CONF
register_opts(CONF)
