"""The compute side of the vsmtio scheduler: each host's mix summary."""
