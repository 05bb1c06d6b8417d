"""scikit-learn's estimator checks on the private (mechanism='dp') DPSEPRegressor.

The fast, non-private instance (mechanism='clipped') belongs in
tests/test_common.py; the 'dp' instance calibrates its noise for every
sample size the checks use (seconds each, via autodp's subsampled RDP), so
it runs with the slow tests.  No check is expected to fail.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp.bnn import DPSEPRegressor


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::skdp.exceptions.PrivacyLeakWarning")
@parametrize_with_checks([DPSEPRegressor(hidden_layer_sizes=(5,), n_epochs=2, random_state=0)])
def test_dp_sep_regressor_sklearn_checks(estimator, check):
    check(estimator)
