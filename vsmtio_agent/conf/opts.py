"""The ``oslo.config.opts`` entry point for oslo-config-generator."""

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import simulator


def list_opts():
    opts = {}
    for module in (agent, simulator):
        opts.update(module.list_opts())
    return list(opts.items())
