"""Options of the tensor maps the launcher encodes, checked before the driver is asked (no GPU)."""

import pytest

from argus.runtime.launch import LaunchError, encode_tensor_map


@pytest.mark.parametrize("promotion", [100, 512, -1])
def test_an_l2_promotion_the_driver_does_not_have_is_refused(promotion):
    with pytest.raises(LaunchError, match=r"l2_promotion=.*use 0, 64, 128 or 256"):
        encode_tensor_map(None, None, l2_promotion=promotion)
