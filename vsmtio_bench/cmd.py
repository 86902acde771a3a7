"""``vsmtio-bench NAME [ARGS]``: run one bench.

Each bench is a module of this package with its own options
(``vsmtio-bench NAME --help``); only the chosen one is imported, so a
bench's dependencies (nova, libvirt, pyperf, matplotlib) are needed only
to run that bench.
"""

import importlib
import sys

BENCHES = {
    'sim': 'every shipped scenario under every kernel model, the '
           'break-even map, the sensitivity study and the pictures',
    'oracle': 'the best static configuration in hindsight, per scenario '
              'and scheduler, over several seeds',
    'yardstick': 'the product against the oracle over several seeds, each '
                 'honest VM against its floors net of noise',
    'search': 'one search of the guard traced period by period: its '
              'picture and what it costs the tenants',
    'objective': 'the product under other CPU floors than the default',
    'step': 'the CPU cost of one policy step, on recorded inputs',
    'tick': 'the CPU cost of one agent period with 200 vCPU threads',
    'scheduler': 'the cost and fleet effect of the vsmtio filter and '
                 'weigher in nova\'s scheduler',
    'libvirtd': 'what the agent\'s libvirt calls cost libvirtd and QEMU',
    'mist': 'MIST on real qemu guests, interfered and protected',
    'kernel': 'the host\'s real kernel against the model: cgroup weights, '
              'wake-ups, spins and switches, processes for vCPUs',
    'calibrate': 'this host\'s idle states, switch and wake-up costs and '
                 'scheduler, as a profile vsmtio-sim --profile takes',
}


def usage():
    width = max(map(len, BENCHES))
    return 'usage: vsmtio-bench NAME [ARGS]\n\nbenches:\n%s\n' % '\n'.join(
        '  %-*s  %s' % (width, name, text) for name, text in BENCHES.items())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ('-h', '--help'):
        sys.stdout.write(usage())
        return 0 if argv else 2
    name, args = argv[0], argv[1:]
    if name not in BENCHES:
        sys.stderr.write('vsmtio-bench: error: no bench %r\n%s'
                         % (name, usage()))
        return 2
    module = importlib.import_module('vsmtio_bench.' + name)
    # pyperf's benches read their options from sys.argv, as its own
    # runner does; the others are handed them
    sys.argv = ['vsmtio-bench %s' % name] + args
    if name in ('tick', 'scheduler'):
        return module.main()
    return module.main(args)


if __name__ == '__main__':
    sys.exit(main())
