"""Arguments whose comparison with a plain value is itself an error (numpy arrays) get the
one-line contract, not numpy's "truth value of an array is ambiguous"."""

import numpy as np
import pytest

import hcsim
from hcsim.errors import ConfigError
from hcsim.topology import ring


@pytest.mark.parametrize("field", ["record", "verify"])
@pytest.mark.parametrize("value", [np.zeros((2, 2)), np.array([True]), [True], "Auto", 1, None])
def test_record_and_verify_take_only_auto_true_false(field, value):
    with pytest.raises(ConfigError, match=f"^{field} = .*'auto', True or False"):
        hcsim.simulate(ring(4, 25e9, 2e-6), "reduce", 1000, "ring", **{field: value})
