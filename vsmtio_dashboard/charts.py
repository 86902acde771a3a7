"""Line charts over time as inline SVG, drawn on the server.

A host page needs a handful of small time series; drawing them here keeps
the plugin free of JavaScript and static files (nothing to collect or
compress), renders the same in every browser and in a screenshot, and
lets the tests read what a chart shows.
"""

import datetime

from django.utils.html import escape
from django.utils.safestring import mark_safe

WIDTH, HEIGHT = 560, 150
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 8, 20
#: Colour-blind safe (Okabe and Ito).
COLOURS = ('#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00',
           '#56B4E9', '#000000', '#F0E442')


def _clock(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime('%H:%M')


def _number(v):
    """Three digits, but whole numbers from 1000 up (no ``1.18e+04``)."""
    if not v:
        return '0'
    return '{:,.0f}'.format(v) if abs(v) >= 1000 else '%.3g' % v


def _range(values, zero):
    """The value axis: from zero, or around the values (ratios near 1)."""
    if zero:
        return min(min(values), 0), max(max(values), 0) or 1.0
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or abs(high) * 0.01 or 1.0
    return low - pad, high + pad


def svg(lines, unit, zero=True):
    """One chart of ``[(legend, [(unix time, value)])]``; ``''`` if empty.

    ``zero``: the value axis starts at zero (counts, rates); otherwise it
    spans the values, so that a ratio of 0.967 is seen apart from its
    floor of 0.97.
    """
    points = [p for _legend, pts in lines for p in pts]
    if not points:
        return ''
    t0 = min(t for t, _v in points)
    t1 = max(t for t, _v in points)
    bottom, top = _range([v for _t, v in points], zero)
    span_t = (t1 - t0) or 1.0
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM

    def x(t):
        return LEFT + (t - t0) / span_t * plot_w

    def y(v):
        return TOP + (top - v) / (top - bottom) * plot_h

    out = ['<svg class="vsmtio-chart" xmlns="http://www.w3.org/2000/svg" '
           'viewBox="0 0 %d %d" width="100%%" style="max-width: %dpx" '
           'role="img">' % (WIDTH, HEIGHT, WIDTH),
           '<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
           'stroke="#ccc"/>' % (LEFT, TOP, plot_w, plot_h),
           '<text x="%d" y="%d" font-size="10" text-anchor="end">%s</text>'
           % (LEFT - 4, TOP + 8, escape(_number(top))),
           '<text x="%d" y="%d" font-size="10" text-anchor="end">%s</text>'
           % (LEFT - 4, TOP + plot_h, escape(_number(bottom))),
           '<text x="%d" y="%d" font-size="10">%s</text>'
           % (LEFT, HEIGHT - 4, _clock(t0)),
           '<text x="%d" y="%d" font-size="10" text-anchor="end">%s UTC'
           '</text>' % (WIDTH - RIGHT, HEIGHT - 4, _clock(t1)),
           '<text x="%d" y="%d" font-size="10" text-anchor="middle">%s'
           '</text>' % (LEFT + plot_w // 2, HEIGHT - 4, escape(unit))]
    for i, (legend, pts) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        coords = ' '.join('%.1f,%.1f' % (x(t), y(v)) for t, v in pts)
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" '
                   'points="%s"><title>%s</title></polyline>'
                   % (colour, coords, escape(legend)))
    out.append('</svg>')
    legend = ''.join(
        '<span class="vsmtio-legend"><span style="color:%s">&#9632;</span> '
        '%s: %s</span> ' % (COLOURS[i % len(COLOURS)], escape(name),
                            escape(_number(pts[-1][1])))
        for i, (name, pts) in enumerate(lines))
    return mark_safe(''.join(out) + '<div>' + legend + '</div>')
