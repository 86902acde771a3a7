"""Options of the ``[vsmtio]`` group in nova.conf (scheduler side)."""

from oslo_config import cfg

vsmtio_group = cfg.OptGroup(
    'vsmtio',
    title='vSMT-IO scheduler options',
    help='Options of the vsmtio scheduler filter and weigher, which keep '
         'each host\'s mix of I/O-bound and CPU-bound vCPUs heterogeneous.')

vsmtio_opts = []


def register_opts(conf):
    conf.register_group(vsmtio_group)
    conf.register_opts(vsmtio_opts, group=vsmtio_group)


def list_opts():
    return [(vsmtio_group, vsmtio_opts)]


register_opts(cfg.CONF)
