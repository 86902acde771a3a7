"""The benches: what the product does on the simulated host and on real
parts, measured against a baseline in the same run.

``vsmtio-bench NAME`` runs one (:mod:`vsmtio_bench.cmd`). The simulator
benches (``sim``, ``oracle``, ``yardstick``, ``objective``, ``step``) drive
:mod:`vsmtio_sim`; the others time the agent (``tick``), nova's scheduler
with the vsmtio filter and weigher (``scheduler``), libvirtd (``libvirtd``)
and MIST on real guests (``mist``); ``kernel`` runs the situations the
product's levers act on under the host's real kernel and in the model,
and compares them. They print ratios and write the
generated pages under ``doc/source/benchmarks``; they assert nothing (the tests
under ``vsmtio_bench/tests`` check their logic).
"""
