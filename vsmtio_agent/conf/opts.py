"""The ``oslo.config.opts`` entry point for oslo-config-generator."""

from vsmtio_agent.conf import agent
from vsmtio_agent.conf import host
from vsmtio_agent.conf import mist
from vsmtio_agent.conf import publish


def list_opts():
    opts = {}
    for module in (agent, host, mist, publish):
        for group, group_opts in module.list_opts().items():
            opts[group] = opts.get(group, []) + list(group_opts)
    return list(opts.items())
