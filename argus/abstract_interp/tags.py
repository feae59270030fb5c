"""Tag records as SMT terms, with the reference interpreter's rules.

A tag is a record of up to :data:`FIELDS` integers; untagged data is ⊥.  As in the
interpreter, a record is stored positionally (field ``i`` is ``tag[i]``; fields past the
record's length are 0) with its length, and ⊥ is length ``-1``:

* a copy, a conversion or a register move keeps the source's tag;
* an elementwise op keeps the tag when every tagged operand carries the same record (equal
  length and fields), otherwise the result is ⊥; scalars carry no tag;
* a fill writes ⊥; ``reset_tags`` makes ⊥; ``tag`` writes the record;
* the zero fill of a copy (a TMA box's or a cp.async's elements outside the source tensor)
  writes a *known zero*: length ``-2 - n`` with the ``n`` fields of the tag the source
  coordinate would have had (the source tensor's tag function), ``-2`` where no tag function
  applies.  A known zero has no ``k`` (an MMA product with one contributes nothing), a tag
  assertion checks it against the tag it stands for, and the elementwise rule compares it
  like any record (the interpreter's encoding of :data:`argus.ir.interpreter._KNOWN_ZERO`).
"""

from __future__ import annotations

from dataclasses import dataclass

from argus.smt import terms as T

FIELDS = 8
UNTAGGED = -1
KNOWN_ZERO = -2  # a known zero with no tag function; ``KNOWN_ZERO - n``: standing for an n-field tag


@dataclass(frozen=True)
class TagValue:
    """``length`` (an Int term, ``-1`` for ⊥) and :data:`FIELDS` Int terms."""

    length: T.Term
    fields: tuple[T.Term, ...]

    @staticmethod
    def record(values: list[T.Term]) -> TagValue:
        padded = list(values) + [T.int_const(0)] * (FIELDS - len(values))
        return TagValue(T.int_const(len(values)), tuple(padded[:FIELDS]))

    @staticmethod
    def known_zero(values: list[T.Term] | None) -> TagValue:
        """A known zero standing for the record ``values`` (``None``: no tag function applies)."""
        if values is None:
            return TagValue(T.int_const(KNOWN_ZERO), tuple(T.int_const(0) for _ in range(FIELDS)))
        padded = list(values) + [T.int_const(0)] * (FIELDS - len(values))
        return TagValue(T.int_const(KNOWN_ZERO - len(values)), tuple(padded[:FIELDS]))

    @property
    def defined(self) -> T.Term:
        """The data carries a tag or is a known zero (is not ⊥)."""
        return T.ne(self.length, UNTAGGED)

    @property
    def tagged(self) -> T.Term:
        """The data carries a record (neither ⊥ nor a known zero)."""
        return T.ge(self.length, 0)

    @property
    def zero(self) -> T.Term:
        """The data is a known zero."""
        return T.le(self.length, KNOWN_ZERO)

    @property
    def stands_for(self) -> T.Term:
        """The length of the record a tag assertion compares: a known zero's stood-for record
        (⊥ where no tag function applied), any other tag's own."""
        length = self.length
        return T.ite(T.lt(length, KNOWN_ZERO), T.sub(KNOWN_ZERO, length),
                     T.ite(T.eq(length, KNOWN_ZERO), UNTAGGED, length))

    def same(self, other: TagValue) -> T.Term:
        """Equal records (the interpreter's comparison: length and every field)."""
        return T.and_(T.eq(self.length, other.length), *(T.eq(a, b) for a, b in zip(self.fields, other.fields)))


BOTTOM = TagValue(T.int_const(UNTAGGED), tuple(T.int_const(0) for _ in range(FIELDS)))


def select(cond: T.Term, a: TagValue, b: TagValue) -> TagValue:
    """``a`` where ``cond`` holds, else ``b``."""
    if a is b:
        return a
    return TagValue(T.ite(cond, a.length, b.length), tuple(T.ite(cond, x, y) for x, y in zip(a.fields, b.fields)))


def merge(tags: list[TagValue]) -> TagValue:
    """The elementwise rule: the common record of all operands, or ⊥ if any two differ."""
    if not tags:
        return BOTTOM
    first = tags[0]
    agree = T.and_(*(first.same(t) for t in tags[1:]))
    return select(agree, first, BOTTOM)
