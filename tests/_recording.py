"""An accountant that records every charge as given, for the tests that check a plan's ``cost``
against what its release charges."""
import dpcore
from dpcore._release import Cost


class RecordingAccountant(dpcore.Accountant):
    """Records every charge as given (the curve too), and never refuses one."""

    def __init__(self):
        super().__init__(1.0)
        self.charges = []

    def charge(self, epsilon=None, delta=None, *, rho=None, label=None, curve=None):
        self.charges.append((Cost(epsilon, delta or 0.0, rho, curve), label))
