"""oslo.config options of the vsmtio agent and its simulated host."""

from oslo_config import cfg

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import host
from vsmtio_agent.conf import mist
from vsmtio_agent.conf import publish
from vsmtio_agent.conf import simulator

CONF = cfg.CONF

agent.register_opts(CONF)
host.register_opts(CONF)
mist.register_opts(CONF)
publish.register_opts(CONF)
simulator.register_opts(CONF)
