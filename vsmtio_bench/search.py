"""One search of the guard, period by period: its picture and its cost.

The yardstick judges where the guard ends; this shows how it gets there,
on one scenario, scheduler and seed of the simulated host: each candidate
from the period it was opened to the one that ended it (a floor lost, a
gain below the best one's, its pairs spent), the periods it ran, the one
kept, and the holdout after. Its cost is what the tenants run while it
searches: the share of periods under a candidate, under the bare host,
and settling after a switch, until the guard settles; then one period in
``holdout_every`` runs bare. The agent is the real one; only the first
search is drawn.

    vsmtio-bench search [--scenario NAME] [--scheduler eevdf|cfs]
        [--seed N] [--after-s S] [--png FILE] [--out RST]

matplotlib is imported only to draw.
"""

import argparse
import os
import sys
import time

from vsmtio_agent import agent as agent_mod
from vsmtio_agent.policy import search as guard
from vsmtio_agent.policy import vocabulary
from vsmtio_bench import document as bench_document
from vsmtio_bench import documents
from vsmtio_sim import driver as sim_driver
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod

SCENARIO = 'fig5_hdfs_hadoop'      # the demo's pair
AFTER_S = 60.0          # drawn after the search, to show the holdout
MAX_S = 900.0           # a search that has not settled by then is cut
PNG = os.path.join(documents.BENCHMARKS, 'search.png')
DOCUMENT = os.path.join(documents.BENCHMARKS, 'search.rst')
CANDIDATE, BARE, SETTLING = 'candidate', 'bare host', 'settling'


def trace(name, scheduler='eevdf', seed=1, after_s=AFTER_S, max_s=MAX_S):
    """The first search on ``name``, period by period (a dict).

    ``periods``: ``(t, arm)`` for every period until ``after_s`` past the
    search's end, ``arm`` what the period ran (a candidate's index, 0 for
    the bare host, None while settling after a switch); ``candidates``:
    each candidate as the search ended it, with when it was opened and
    ended; ``settled_s``: when the guard kept its choice (None: cut at
    ``max_s``). A tenant's change cuts the search short (``restarts``,
    the last at ``since``; the host waits bare for the classes to hold,
    then searches again): the candidates are the last search's.
    """
    conf = runner.make_conf(name, 'vsmtio', seed, overrides={
        ('vsmtio_sim', 'scheduler'): scheduler})
    driver = sim_driver.SimulatedHostDriver(conf)
    sim = driver.simulation
    ag = agent_mod.Agent(conf, driver)
    got = {'periods': [], 'opened': {}, 'ended': {}, 'settled_s': None,
           'candidates': (), 'kept': None, 'reason': None,
           'period_s': conf.vsmtio_agent.period, 'restarts': 0,
           'since': 0.0, 'pairs': {}}
    runs = {'next': None}

    def before():
        t = sim.now / 1e9
        done = got['settled_s']
        return t < max_s and (done is None or t < done + after_s)

    def after(_period):
        g = ag.engine.guard
        t = sim.now / 1e9
        got['periods'].append((t, runs['next']))
        # what runs next: the state is the one for the coming period
        runs['next'] = (None if g.settling else 0
                        if g.in_force == vocabulary.BARE else _index(g))
        if got['settled_s'] is not None:
            return
        # a candidate's pairs only grow within one search, which a change
        # of tenant cuts short (the host then waits bare, with none)
        if got['pairs'] and (not g.candidates or any(
                got['pairs'].get(c.index, 0) > c.n for c in g.candidates)):
            got.update(opened={}, ended={}, restarts=got['restarts'] + 1,
                       since=t)
        got['pairs'] = {c.index: c.n for c in g.candidates}
        for c in g.candidates:
            got['opened'].setdefault(c.index, t)
            if c.status in (guard.OUT, guard.DONE):
                got['ended'].setdefault(c.index, t)
        if g.searches:
            got.update(settled_s=t, candidates=g.candidates, kept=g.kept,
                       reason=g.finished.reason if g.finished else None)

    try:
        ag.tick()
        ag.loop(before=before, after=after)
    finally:
        ag.stop()
    return got


def _index(g):
    """The index of the candidate in force (or -1: the kept one)."""
    for c in g.candidates:
        if c.config == g.in_force and g.phase == guard.PROBE:
            return c.index
    return -1


def cost(got):
    """``{arm: share of periods}`` until the search ended, and periods."""
    end = got['settled_s']
    arms = [a for t, a in got['periods'] if end is None or t <= end]
    counts = {CANDIDATE: sum(1 for a in arms if a is not None and a > 0),
              BARE: sum(1 for a in arms if a == 0),
              SETTLING: sum(1 for a in arms if a is None)}
    n = max(1, len(arms))
    return {k: v / n for k, v in counts.items()}, len(arms)


def how_it_ended(c, kept):
    """A candidate's end in a word: kept, floor, gain, spent or open."""
    if c.config == kept:
        return 'kept'
    if c.lost:
        return 'floor'
    if c.status == guard.OUT:
        return 'gain'
    return 'spent' if c.status == guard.DONE else 'open'


def table_rows(got):
    out = []
    for c in got['candidates']:
        out.append([str(c.index), guard.describe(c.config),
                    '%.1f' % got['opened'].get(c.index, 0.0),
                    '%.1f' % got['ended'].get(c.index, got['settled_s']),
                    str(c.n), how_it_ended(c, got['kept']),
                    str(c.spends or c.index), c.reason])
    return out


HEADER = ['#', 'candidate', 'opened, s', 'ended, s', 'pairs', 'end',
          'level of', 'why']
MARKS = {'kept': ('*', '#228833', 120), 'floor': ('x', '#cc3311', 40),
         'gain': ('|', '#ee7733', 60), 'spent': ('o', '#777777', 25),
         'open': ('.', '#777777', 25)}


def picture(got, title, png):
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    cands = got['candidates']
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.24 * len(cands)))
    end = got['settled_s'] or got['periods'][-1][0]
    for c in cands:
        t0 = got['opened'].get(c.index, 0.0)
        t1 = got['ended'].get(c.index, end)
        ax.plot([t0, t1], [c.index] * 2, color='#bbbbbb', lw=1)
        runs = [t for t, a in got['periods']
                if a == c.index and t >= got['since']]
        ax.scatter(runs, [c.index] * len(runs), s=4, color='#004488')
        mark, colour, size = MARKS[how_it_ended(c, got['kept'])]
        ax.scatter([t1], [c.index], marker=mark, color=colour, s=size,
                   zorder=3)
    bare = [t for t, a in got['periods'] if a == 0 and t > end]
    ax.scatter(bare, [0] * len(bare), marker='|', color='#aa3377', s=60)
    ax.axvline(end, color='#228833', ls=':', lw=1)
    ax.set_yticks([0] + [c.index for c in cands])
    ax.set_yticklabels(['holdout'] + ['%d %s' % (c.index, guard.describe(
        c.config)[:48]) for c in cands], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel('simulated seconds (dots: periods a candidate ran; '
                  'x: a floor lost, |: gain below the best, o: pairs '
                  'spent, *: kept; dotted: settled)', fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def document(got, args, wall_s):
    shares, n = cost(got)
    settled = got['settled_s']
    lines = [
        '=' * 32, 'One search of the guard, traced', '=' * 32, '',
        'Generated by ``%s`` at commit ``%s``, in %.0f '
        'minutes of wall time: the real agent on the simulated host, '
        '``%s`` under %s, seed %d.' % (
            documents.command('search', args.argv, ('--out', '--png')),
            documents.commit(),
            wall_s / 60.0, args.scenario, args.scheduler, args.seed), '',
        '.. image:: search.png', '',
        ('The search settled at %.1f s of the simulated host (%d agent '
         'periods of %g s): %.0f%% of them ran a candidate, %.0f%% the bare '
         'host and %.0f%% settled after a switch (unmeasured).' % (
             settled, n, got['period_s'], 100 * shares[CANDIDATE],
             100 * shares[BARE], 100 * shares[SETTLING])
         if settled is not None else
         'The search had not settled at %.0f s, where it was cut.'
         % got['periods'][-1][0]), '',
        ('A tenant changed %d times during it, each time cutting the '
         'search short (the host then waits bare for the classes to hold); '
         'the last search is drawn, from %.1f s.'
         % (got['restarts'], got['since']) if got['restarts'] else
         'No tenant changed during it.'), '',
        'It kept %s: %s' % (guard.describe(got['kept'] or
                                           vocabulary.BARE),
                            got['reason'] or '-'), '',
        '"level of" is the candidate whose level its floors were held to '
        '(a step up a ladder from one whose floors were shown takes its '
        'level; :doc:`../policy`).', '',
        bench_document.rst_table(HEADER, table_rows(got)), '']
    return '\n'.join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--scenario', default=SCENARIO)
    p.add_argument('--scheduler', default='eevdf', choices=('cfs', 'eevdf'))
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--after-s', type=float, default=AFTER_S,
                   help='simulated seconds drawn after the search')
    p.add_argument('--png', default=None,
                   help='the picture (default: %s for the defaults '
                        'of scenario, scheduler and seed, nothing '
                        'otherwise)' % PNG)
    p.add_argument('--out', default=None,
                   help='the page (default: %s likewise)' % DOCUMENT)
    args = p.parse_args(argv)
    args.argv = argv
    if args.scenario not in scenario_mod.shipped() and not os.path.isfile(
            args.scenario):
        p.error('no scenario %r' % args.scenario)
    if args.seed < 1 or not 0.0 <= args.after_s <= MAX_S:
        p.error('--seed is at least 1 and --after-s within 0 to %g' % MAX_S)
    t0 = time.time()
    got = trace(args.scenario, args.scheduler, args.seed, args.after_s)
    default = (args.scenario, args.scheduler, args.seed) == (SCENARIO,
                                                             'eevdf', 1)
    png = args.png or (PNG if default else None)
    if png and got['candidates']:
        picture(got, '%s under %s, seed %d: the guard\'s first search' % (
            args.scenario, args.scheduler, args.seed), png)
    text = document(got, args, time.time() - t0)
    out = args.out or (DOCUMENT if default else None)
    if out:
        with open(out, 'w') as f:
            f.write(text)
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
