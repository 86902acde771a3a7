"""Watcher's goal and strategy that repair hosts left outside the mix band.

:mod:`.repair` plans (pure, no Watcher import); :mod:`.strategy` is the
glue Watcher's decision engine loads through its entry points.
"""
