"""A kernel's cluster shape may be a function of its consts (chosen per specialization)."""

import pytest

import argus.spec as A
from argus.spec.builder import SpecError


def _kernel(cluster):
    @A.kernel(threads=32, grid=lambda n: (A.cdiv(n, 32),), cluster=cluster)
    def copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), C: A.const = 1):
        i = A.block_id(0) * 32 + A.thread_id()
        if i < x.shape[0]:
            A.store(A.load(x[i]), y[i])

    return copy


def test_cluster_follows_the_const():
    k = _kernel(lambda C: (C, 1, 1))
    assert k.specialize(C=2).launch.cluster == (2, 1, 1)
    assert k.specialize().launch.cluster == (1, 1, 1)
    assert _kernel(lambda C: (1, C)).specialize(C=4).launch.cluster == (1, 4, 1)  # missing dims are 1
    assert _kernel((2, 1, 1)).specialize().launch.cluster == (2, 1, 1)


@pytest.mark.parametrize("cluster, match", [(lambda C: (C, 0, 1), "positive integers"),
                                            (lambda C: (C * 8, 1, 1), "more than 16"),
                                            (lambda n: (2, 1, 1), "not a size, const"),
                                            (lambda C: (A.cdiv(C, 1) * 1.5, 1, 1), "positive integers")])
def test_bad_cluster_shapes_are_spec_errors(cluster, match):
    with pytest.raises(SpecError, match=match):
        _kernel(cluster).specialize(C=4)
