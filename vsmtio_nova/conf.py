"""Options of the ``[vsmtio]`` group in nova.conf (scheduler side)."""

from oslo_config import cfg

from vsmtio_contract import config_types
from vsmtio_nova import io_inventory

# nova's largest default weigher multiplier (build_failure_weight_multiplier):
# enough for the mix to outweigh every other weigher, never infinite.
MAX_WEIGHT_MULTIPLIER = 1000000.0

vsmtio_group = cfg.OptGroup(
    'vsmtio',
    title='vSMT-IO scheduler options',
    help='Options of the vsmtio scheduler filter and weigher, which keep '
         'each host\'s mix of I/O-bound and CPU-bound vCPUs heterogeneous. '
         'The I/O share of a host is its I/O-bound vCPUs divided by its '
         'classified (I/O-bound plus CPU-bound) vCPUs; vCPUs of flavors '
         'whose ``vsmtio:workload`` is ``auto`` or unset count only with '
         'the class their agent measured and signed (see '
         '``measured_class_secret``). '
         'Host aggregate metadata ``vsmtio:target_io_fraction``, '
         '``vsmtio:min_io_fraction``, ``vsmtio:max_io_fraction`` and '
         '``vsmtio:weight_multiplier`` override the options of the same '
         'name for the aggregate\'s hosts.')

vsmtio_opts = config_types.finite([
    cfg.FloatOpt('target_io_fraction',
                 default=0.5, min=0.0, max=1.0,
                 help='The I/O share of classified vCPUs the '
                      '``WorkloadMixWeigher`` steers every host towards. '
                      'vSMT-IO gains most when a host runs about as many '
                      'I/O-bound as CPU-bound vCPUs, hence 0.5.'),
    cfg.FloatOpt('min_io_fraction',
                 default=0.1, min=0.0, max=1.0,
                 help='``WorkloadMixFilter`` rejects a host when placing a '
                      'CPU-bound instance would bring its I/O share below '
                      'this value (once the host holds '
                      '``filter_min_classified_vcpus``). Must not exceed '
                      '``max_io_fraction``.'),
    cfg.FloatOpt('max_io_fraction',
                 default=0.9, min=0.0, max=1.0,
                 help='``WorkloadMixFilter`` rejects a host when placing an '
                      'I/O-bound instance would bring its I/O share above '
                      'this value (once the host holds '
                      '``filter_min_classified_vcpus``).'),
    cfg.IntOpt('filter_min_classified_vcpus',
               default=16, min=0, max=100000,
               help='``WorkloadMixFilter`` judges a host only once it '
                    'already holds at least this many classified vCPUs: '
                    'below it a host\'s share says little, and an empty '
                    'host must accept its first instance. With 0 even an '
                    'empty host is judged, so a request whose own share '
                    '(0 or 1) lies outside the bounds finds no host.'),
    cfg.IntOpt('instance_class_cache_seconds',
               default=300, min=0, max=86400,
               help='Seconds the scheduler reuses the workload class and '
                    'vCPUs of an instance it loaded from the cell database '
                    'for later requests. Loading costs the scheduler work '
                    'per instance, for every instance on every candidate '
                    'host (doc/source/benchmarks/scheduler.rst measures '
                    'it); an instance\'s flavor changes only when '
                    'it is resized, and then its old class counts for at '
                    'most this long. 0 loads every request afresh.'),
    cfg.StrOpt('measured_class_secret',
               secret=True,
               help='Controllers (nova-scheduler and the Watcher '
                    'strategy\'s own option of the same name): the root '
                    'secret every compute host\'s measured-class key is '
                    'derived from (HMAC-SHA256 of the host\'s name, '
                    'printed by ``vsmtio-nova-conf host-key HOST '
                    'NOVA_CONF``). With it, an instance whose flavor is '
                    '``auto`` counts with the class its agent measured and '
                    'signed (server metadata ``vsmtio:measured_class``) '
                    'with the key of the host it runs on; a value without '
                    'such a signature, or past its expiry, does not count, '
                    'and a missing or untrusted value counts as the last '
                    'one verified until that one expires. Do not set it on '
                    'compute hosts: there ``measured_class_host_keys`` '
                    'holds the host\'s own key, so that a compromised host '
                    'cannot sign for another (set on a compute host '
                    'without ``measured_class_host_keys``, nova-compute '
                    'derives its key from it and warns). Unset: measured '
                    'classes are ignored and ``auto`` instances are not '
                    'counted.'),
    cfg.StrOpt('measured_class_previous_secret',
               secret=True,
               help='Controllers: the root secret ``measured_class_secret`` '
                    'replaced, during a rotation. Classes signed with a '
                    'key derived from either count; unset it once every '
                    'host signs with its new key and the agents\' '
                    '``measured_class_lifetime`` has passed.'),
    cfg.ListOpt('measured_class_host_keys',
                secret=True,
                help='nova-compute: this host\'s own measured-class keys, '
                     'newest first: the key its agent signs with '
                     '(``vsmtio-nova-conf host-key HOST NOVA_CONF`` on a '
                     'controller prints it from the root secret), then, '
                     'during a rotation, the previous one. nova-compute '
                     'counts an ``auto`` instance with the class signed '
                     'with one of them for the instance on this host '
                     '(``[DEFAULT] host``).'),
    cfg.FloatOpt('weight_multiplier',
                 default=1.0, min=0.0, max=MAX_WEIGHT_MULTIPLIER,
                 help='Multiplier of the ``WorkloadMixWeigher``. Its weights '
                      'are normalised to [0, 1] like every nova weigher; '
                      '1.0 weighs the host mix as much as the default RAM '
                      'weigher weighs free memory. 0.0 disables it.'),
    cfg.StrOpt('sysfs_root',
               default='/sys',
               help='Where nova-compute finds sysfs. It reads the vsmtio '
                    'kernel ABI version there (``kernel/vsmtio/'
                    'abi_version``) to decide whether this host advertises '
                    'the ``CUSTOM_VSMTIO_CONTEXT_RETENTION`` placement '
                    'trait. Change it only to present another host in '
                    'tests.'),
])


def check(conf=cfg.CONF):
    """Read every ``[vsmtio]`` option now; ``ValueError`` naming the first bad.

    oslo.config checks a value only when it is first read, and the
    scheduler reads some options only when it weighs hosts: the filter and
    the weigher call this when nova loads them, so a bad value (``nan``,
    out of bounds) stops nova-scheduler's start in one line instead of
    failing, or weighing nan, at the first request.
    """
    opts = getattr(conf, vsmtio_group.name)
    for opt in vsmtio_opts + io_inventory.capacity_opts:
        try:
            value = getattr(opts, opt.dest)
        except (cfg.Error, ValueError) as exc:
            # oslo.config's error for a value: the type's own (what oslo
            # raised this from) says why; or a ``$name`` it cannot expand
            raise ValueError('[%s] %s: %s' % (vsmtio_group.name, opt.dest,
                                              exc.__context__ or exc))
        if value is None and opt.default is not None:
            # oslo.config reads an empty number as None: no number at all
            raise ValueError('[%s] %s: empty: give a value, or remove the '
                             'line for the default (%s)'
                             % (vsmtio_group.name, opt.dest, opt.default))
    if opts.min_io_fraction > opts.max_io_fraction:
        raise ValueError(
            '[vsmtio] min_io_fraction (%s) exceeds max_io_fraction (%s)'
            % (opts.min_io_fraction, opts.max_io_fraction))


def register_opts(conf):
    conf.register_group(vsmtio_group)
    conf.register_opts(vsmtio_opts, group=vsmtio_group)
    conf.register_opts(io_inventory.capacity_opts, group=vsmtio_group)


def list_opts():
    return [(vsmtio_group, vsmtio_opts + io_inventory.capacity_opts)]


register_opts(cfg.CONF)
