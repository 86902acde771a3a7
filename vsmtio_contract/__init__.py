"""The contract between the vsmtio agent and the nova plugin.

What both sides must agree on lives here and only here: the workload
classes and the signed measured class (:mod:`.workload`), the I/O
reservation's flavor keys and placement resource classes
(:mod:`.io_reservation`), the patched kernel's ABI probe
(:mod:`.kernel_abi`), and the one parser of each ``vsmtio:`` key that
nova-api and every run-time reader use (:mod:`.specs`), and the
configuration types both sides' options use (:mod:`.config_types`). Neither
``vsmtio_agent`` nor ``vsmtio_nova`` imports the other; both import this
package, which imports neither (nor nova).
"""
