"""Check a differential-privacy claim empirically.

``audit`` refits an estimator on two neighbouring datasets many times and
turns a distinguishing test into a high-confidence lower bound on its epsilon
(Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).  A lower bound above the
estimator's ``privacy_spent_`` refutes the claim.  ``python -m skdp.audit``
audits every estimator that is cheap enough to refit; ``--cases FILE`` adds
cases of one's own (:class:`AuditCase`), such as the deliberately broken
variants of the test suite, which the audit must flag.
"""

from ._bounds import clopper_pearson, epsilon_lower_bound, mu_lower_bound
from ._runner import AuditCase, AuditResult, audit, replace_one_neighbour

__all__ = [
    "AuditCase",
    "AuditResult",
    "audit",
    "clopper_pearson",
    "epsilon_lower_bound",
    "mu_lower_bound",
    "replace_one_neighbour",
]
