"""What a run reports: the paper's metrics, as JSON and as tables.

I/O throughput is served requests per second (io and mixed workloads), CPU
throughput retired instructions per second (cpu and mixed workloads), both
over the honest tenants only (a VM a scenario marks ``adversary`` is
reported on its own: its gain is what fairness forbids),
vCPU switches are deschedulings (voluntary + involuntary) per second, and
spinning / retention time are shares of all hyperthread time. Per-request
run / ready / wait times follow the paper's Table 7: the time a vCPU spent
running (retention and polling included), runnable but waiting for a
hyperthread, and blocked, between two served requests.
"""

import prettytable

from vsmtio_sim import engine

STATE = {name: i for i, name in enumerate(engine.STATES)}


def measure(sim, start, end, wall_s, extra=None):
    """Build a result dict from two :meth:`Simulation.totals` copies."""
    span = (end['time'] - start['time']) / 1e9
    ht_ns = sum(end['state_ns']) - sum(start['state_ns'])
    io_ht_ns = sum(end['io_state_ns']) - sum(start['io_state_ns'])

    def share(key, state, total):
        d = end[key][STATE[state]] - start[key][STATE[state]]
        return 100.0 * d / total if total else 0.0

    adversaries = sim.scenario.adversaries
    per_wl, per_vm = {}, {}
    switches = 0
    for v in sim.vcpus:
        a, b = start['vcpus'][v.ref], end['vcpus'][v.ref]
        w = per_wl.setdefault(v.wl.name, {
            'kind': v.wl.kind, 'vcpus': 0, 'instructions': 0.0,
            'requests': 0, 'req': [0.0, 0.0, 0.0], 'retentions': 0,
            'retention_timeouts': 0})
        w['vcpus'] += 1
        w['instructions'] += b.instructions - a.instructions
        w['requests'] += b.requests - a.requests
        switches += b.switches - a.switches
        for i in range(3):
            w['req'][i] += b.per_request[i] - a.per_request[i]
        w['retentions'] += b.retentions - a.retentions
        w['retention_timeouts'] += (b.retention_timeouts
                                    - a.retention_timeouts)
        vm = per_vm.get(v.vm) or per_vm.setdefault(v.vm, {
            # a VM whose phases mix kinds counts as mixed (both classes)
            'workload': v.wl.name, 'kind': sim.scenario.vm_kind(v.vm),
            'adversary': v.vm in adversaries,
            'instructions_per_s': 0.0, 'requests_per_s': 0.0})
        vm['instructions_per_s'] += (b.instructions - a.instructions) / span
        vm['requests_per_s'] += (b.requests - a.requests) / span
    workloads = {}
    io_tp = cpu_tp = 0.0
    for name, w in sorted(per_wl.items()):
        out = {'kind': w['kind'], 'vcpus': w['vcpus'],
               'instructions_per_s': w['instructions'] / span}
        if w['kind'] != 'cpu':
            n = w['requests']
            out['requests_per_s'] = n / span
            sleep, ready, run = w['req']
            out['per_request_us'] = {
                'run': run / n / 1e3 if n else None,
                'ready': ready / n / 1e3 if n else None,
                'wait': sleep / n / 1e3 if n else None}
            out['retentions_per_s'] = w['retentions'] / span
            out['retention_timeouts_per_s'] = w['retention_timeouts'] / span
        workloads[name] = out
    # The host's classes are its honest tenants: what an adversary gains
    # by shaping its waits is what the fairness invariant forbids, never a
    # gain of the host's (its own figures stay in 'workloads' and 'vms').
    for vm in per_vm.values():
        if vm['adversary']:
            continue
        if vm['kind'] != 'cpu':
            io_tp += vm['requests_per_s']
        if vm['kind'] != 'io':
            cpu_tp += vm['instructions_per_s']
    events = end['events'] - start['events']
    result = {
        'scenario': sim.scenario.name,
        'title': sim.scenario.title,
        'kernel': sim.kernel.name,
        'seed': sim.seed,
        'cores': sim.scenario.cores,
        'vcpus': len(sim.vcpus),
        'measured_s': span,
        'warmup_s': start['time'] / 1e9,
        'io_throughput': io_tp,
        'cpu_throughput': cpu_tp,
        'vcpu_switches_per_s': switches / span,
        'spinning_pct': share('state_ns', 'polling', ht_ns),
        'retention_pct': share('state_ns', 'retaining', ht_ns),
        'switching_pct': share('state_ns', 'switching', ht_ns),
        'idle_pct': share('state_ns', 'idle', ht_ns),
        'io_thread_retention_pct': share('io_state_ns', 'retaining',
                                         io_ht_ns),
        'workloads': workloads,
        'vms': per_vm,
        'adversaries': sorted(adversaries),
        'sim': {'events': end['events'], 'wall_s': wall_s,
                'events_per_s': end['events'] / wall_s if wall_s else None,
                'sim_s_per_wall_s': (end['time'] / 1e9 / wall_s
                                     if wall_s else None),
                'measured_events': events},
    }
    if extra:
        result.update(extra)
    return result


def _pct(x):
    return '%.1f%%' % x


def _num(x):
    if x is None:
        return '-'
    for unit, div in (('G', 1e9), ('M', 1e6), ('k', 1e3)):
        if abs(x) >= div:
            return '%.2f%s' % (x / div, unit)
    return '%.1f' % x


def run_table(result):
    """A readable table of one run."""
    t = prettytable.PrettyTable(['metric', 'value'])
    t.align = 'l'
    t.add_row(['I/O throughput (requests/s)', _num(result['io_throughput'])])
    t.add_row(['CPU throughput (instructions/s)',
               _num(result['cpu_throughput'])])
    t.add_row(['vCPU switches/s', _num(result['vcpu_switches_per_s'])])
    t.add_row(['spinning time', _pct(result['spinning_pct'])])
    t.add_row(['retention time', _pct(result['retention_pct'])])
    t.add_row(['switching time', _pct(result['switching_pct'])])
    if 'agent' in result:
        a = result['agent']
        t.add_row(['agent: periods / final timeout',
                   '%d / %.0f us' % (a['decisions'], a['timeout_us'])])
    lines = ['%s: %s, kernel %s, seed %d, %.2f s measured'
             % (result['scenario'], result['title'], result['kernel'],
                result['seed'], result['measured_s'])]
    lines += profile_lines(result)
    lines += [t.get_string(),
              workload_table({result['kernel']: result}).get_string(),
              speed_line(result)]
    return '\n'.join(lines)


def profile_lines(result):
    """Whose costs a run stood on, where a host profile gave them.

    The inputs by name, each one's source in the result's ``profile``
    (``--json``): a prediction on another host's costs must say so.
    """
    p = result.get('profile')
    if not p:
        return []
    return ['inputs from host profile %s, measured on %s at %s (Linux %s): '
            '%s' % (p['path'], p['host'], p['measured_at'],
                    p.get('kernel_release') or 'unknown',
                    ', '.join(sorted(p['inputs'])))]


def speed_line(result):
    s = result['sim']
    return ('simulator: %d events in %.1f s wall = %.0f events/s, %.2f '
            'simulated s per wall s' % (s['events'], s['wall_s'],
                                        s['events_per_s'] or 0,
                                        s['sim_s_per_wall_s'] or 0))


def workload_table(results):
    """Per workload and kernel: throughput and Table 7's times."""
    t = prettytable.PrettyTable(['workload', 'kernel', 'throughput',
                                 'run us/req', 'ready us/req',
                                 'wait us/req'])
    t.align = 'r'
    t.align['workload'] = t.align['kernel'] = 'l'
    for kernel, r in results.items():
        for name, w in r['workloads'].items():
            if w['kind'] == 'cpu':
                t.add_row([name, kernel,
                           _num(w['instructions_per_s']) + ' instr/s',
                           '-', '-', '-'])
            else:
                p = w['per_request_us']
                t.add_row([name, kernel,
                           _num(w['requests_per_s']) + ' req/s',
                           _num(p['run']), _num(p['ready']),
                           _num(p['wait'])])
    return t


def normalise(results, baseline='vanilla'):
    """Each kernel's throughputs relative to ``baseline``'s."""
    base = results[baseline]
    out = {}
    for kernel, r in results.items():
        row = {
            'io': _ratio(r['io_throughput'], base['io_throughput']),
            'cpu': _ratio(r['cpu_throughput'], base['cpu_throughput']),
            'switches_per_s': r['vcpu_switches_per_s'],
            'spinning_pct': r['spinning_pct'],
            'retention_pct': r['retention_pct'],
            'workloads': {}}
        for name, w in r['workloads'].items():
            # a phased vCPU counts under the workload it runs at the
            # window's end, which the baseline's may not have reached
            b = base['workloads'].get(name)
            key = ('requests_per_s' if w['kind'] != 'cpu'
                   else 'instructions_per_s')
            row['workloads'][name] = None if b is None else _ratio(
                w[key], b[key])
        out[kernel] = row
    return out


def _ratio(a, b):
    return a / b if b else None


def compare_table(results, baseline='vanilla'):
    norm = normalise(results, baseline)
    names = list(next(iter(results.values()))['workloads'])
    t = prettytable.PrettyTable(
        ['kernel', 'I/O thr.', 'CPU thr.'] + names
        + ['vCPU switches/s', 'spinning', 'retention'])
    t.align = 'r'
    t.align['kernel'] = 'l'
    for kernel, n in norm.items():
        t.add_row([kernel, _x(n['io']), _x(n['cpu'])]
                  + [_x(n['workloads'][w]) for w in names]
                  + [_num(n['switches_per_s']), _pct(n['spinning_pct']),
                     _pct(n['retention_pct'])])
    r0 = next(iter(results.values()))
    head = ('%s: %s (%d cores, %d vCPUs); throughputs normalised to %s'
            % (r0['scenario'], r0['title'], r0['cores'], r0['vcpus'],
               baseline))
    lines = [head] + profile_lines(r0) + [
        t.get_string(), workload_table(results).get_string()]
    for kernel, r in results.items():
        if 'agent' in r:
            lines.extend(agent_lines(kernel, r['agent']))
    return '\n'.join(lines)


def agent_lines(kernel, a):
    """What the real agent did: periods, timeout, settling, verdicts."""
    settled = a.get('settled_at_s')
    lines = ['%s: the real agent ran %d periods of %g s; final retention '
             'timeout %.0f us; %d swaps; %s; mechanisms kept: %s'
             % (kernel, a['decisions'], a['period_s'], a['timeout_us'],
                a['swaps'],
                'settled after %.1f s' % settled if settled
                else 'not settled (fixed window)' if settled is None
                else 'fixed window',
                ', '.join(a.get('mechanisms') or ()) or 'none')]
    if a.get('timeouts_us') is not None:
        lines.append('  retaining: %s' % (', '.join(
            '%s at %g us' % kv for kv in a['timeouts_us'].items())
            or 'no VM'))
    if a.get('weights'):
        lines.append('  weights: %s' % ', '.join(
            '%s x%g' % kv for kv in a['weights'].items()))
    for v in a.get('verdicts') or ():
        lines.append('  guard: %s%s %s (%s)' % (
            v['mechanism'],
            ' for %s' % v['domain'] if v.get('domain') else '',
            'kept' if v['kept'] else 'dropped', v['reason']))
    return lines


def _x(v):
    return '-' if v is None else '%.3f' % v
