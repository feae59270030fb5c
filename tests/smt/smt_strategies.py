"""Hypothesis strategies for random well-sorted terms over a fixed vocabulary.

Every term is built through the simplifying constructors (what argus code builds), so the
SMT-LIB round trip must be the identity on all of them.
"""

from __future__ import annotations

from hypothesis import strategies as st

from argus.smt import terms as T

X = T.int_var("x", -8, 8)
Y = T.int_var("y", 0, 15)
Z = T.int_var("z", -3, 3)
P = T.bool_var("p")
Q = T.bool_var("q")
B = T.bv_var("b", 4)
C = T.bv_var("c", 4)
F = T.Function("f", (T.INT,), T.INT, bounds=(0, 7))
G = T.Function("g", (T.BitVec(4), T.BOOL), T.INT)

#: everything a term below may mention (pass to parse_term / as a model domain)
DECLARATIONS = (X, Y, Z, P, Q, B, C, F, G)
INT_VARS = (X, Y, Z)


def _int_bitwise(kind: str, a: T.Term, b: T.Term) -> T.Term:
    try:
        return {"xor": T.int_xor, "and": T.int_and, "or": T.int_or}[kind](a, b)
    except T.TermError:  # an operand without finite bounds: explicit width
        return {"xor": T.int_xor, "and": T.int_and, "or": T.int_or}[kind](
            a, b, width=8, signed=True
        )


def terms(max_leaves: int = 12, functions: bool = True, bitvectors: bool = True):
    """A strategy of ``(Int term, Bool term, BitVec(4) term)`` triples."""
    int_leaf = st.one_of(st.integers(-10, 10).map(T.int_const), st.sampled_from(INT_VARS))
    bv_leaf = st.one_of(st.integers(0, 15).map(lambda v: T.bv_const(v, 4)), st.sampled_from((B, C)))
    bool_leaf = st.one_of(st.sampled_from((P, Q, T.TRUE, T.FALSE)))

    def extend(children):
        ints = children.map(lambda t: t[0])
        bools = children.map(lambda t: t[1])
        bvs = children.map(lambda t: t[2])
        int_nodes = [
            st.builds(T.add, ints, ints),
            st.builds(T.sub, ints, ints),
            st.builds(T.mul, ints, ints),
            st.builds(T.neg, ints),
            st.builds(T.abs_, ints),
            st.builds(T.floordiv, ints, ints),
            st.builds(T.floormod, ints, ints),
            st.builds(T.div, ints, ints),
            st.builds(T.mod, ints, ints),
            st.builds(T.trunc_div, ints, ints),
            st.builds(T.trunc_mod, ints, ints),
            st.builds(T.ite, bools, ints, ints),
            st.builds(_int_bitwise, st.sampled_from(["xor", "and", "or"]), ints, ints),
            st.builds(lambda a, k: a >> k, ints, st.integers(0, 3)),
        ]
        if functions:
            int_nodes.append(st.builds(F, ints))
        if bitvectors:
            int_nodes.append(st.builds(T.bv2nat, bvs))
        if functions and bitvectors:
            int_nodes.append(st.builds(G, bvs, bools))
        bool_nodes = [
            st.builds(T.lt, ints, ints),
            st.builds(T.le, ints, ints),
            st.builds(T.eq, ints, ints),
            st.builds(T.ne, ints, ints),
            st.builds(T.and_, bools, bools),
            st.builds(T.or_, bools, bools),
            st.builds(T.not_, bools),
            st.builds(T.implies, bools, bools),
            st.builds(T.xor_, bools, bools),
            st.builds(T.distinct, ints, ints, ints),
            st.builds(T.ite, bools, bools, bools),
        ]
        if bitvectors:
            bool_nodes += [
                st.builds(T.ult, bvs, bvs),
                st.builds(T.slt, bvs, bvs),
                st.builds(T.eq, bvs, bvs),
            ]
        bv_nodes = [
            st.builds(T.bvadd, bvs, bvs),
            st.builds(T.bvmul, bvs, bvs),
            st.builds(T.bvxor, bvs, bvs),
            st.builds(T.bvand, bvs, bvs),
            st.builds(T.bvlshr, bvs, bvs),
            st.builds(T.bvashr, bvs, bvs),
            st.builds(T.bvshl, bvs, bvs),
            st.builds(T.bvudiv, bvs, bvs),
            st.builds(T.bvsrem, bvs, bvs),
            st.builds(T.bvsmod, bvs, bvs),
            st.builds(T.bvnot, bvs),
            st.builds(lambda a: T.int2bv(a, 4), ints),
            st.builds(lambda a, b: T.extract(T.concat(a, b), 5, 2), bvs, bvs),
            st.builds(lambda a: T.extract(T.sign_extend(a, 2), 4, 1), bvs),
            st.builds(T.ite, bools, bvs, bvs),
        ]
        return st.tuples(
            st.one_of(ints, *int_nodes), st.one_of(bools, *bool_nodes), st.one_of(bvs, *bv_nodes)
        )

    triples = st.recursive(st.tuples(int_leaf, bool_leaf, bv_leaf), extend, max_leaves=max_leaves)
    return triples


def bool_terms(**kw):
    """Random Bool terms."""
    return terms(**kw).map(lambda t: t[1])


def int_terms(**kw):
    """Random Int terms."""
    return terms(**kw).map(lambda t: t[0])


def any_terms(**kw):
    """Random terms of any sort."""
    return terms(**kw).flatmap(lambda t: st.sampled_from(t))


def environments():
    """Random values for every variable of the vocabulary, within their bounds, and tables for f, g."""
    return st.fixed_dictionaries(
        {
            "x": st.integers(-8, 8),
            "y": st.integers(0, 15),
            "z": st.integers(-3, 3),
            "p": st.booleans(),
            "q": st.booleans(),
            "b": st.integers(0, 15),
            "c": st.integers(0, 15),
            "f": st.integers(0, 7).map(lambda d: {None: d}),
            "g": st.integers(-5, 5).map(lambda d: {None: d}),
        }
    )
