"""One apply's log: what changed, what was already so, what failed.

Every step of an apply (withdrawing, planning, recording, writing) adds to
the one log, and the log builds the :class:`ApplyResult` the agent gets.
"""

from vsmtio_agent.drivers import base


class ApplyLog:

    def __init__(self):
        self.applied = 0
        self.unchanged = 0
        self.failed = 0
        self.messages = []

    def done(self):
        """One change made."""
        self.applied += 1

    def same(self):
        """One change not needed (or no longer possible: nothing to do)."""
        self.unchanged += 1

    def fail(self, message=None):
        """One change that failed, and why (if not logged already)."""
        self.failed += 1
        if message:
            self.messages.append(message)

    def note(self, message):
        """Something the operator should read that is not a failure."""
        self.messages.append(message)

    def result(self):
        return base.ApplyResult(applied=self.applied,
                                unchanged=self.unchanged,
                                failed=self.failed,
                                messages=tuple(self.messages))
