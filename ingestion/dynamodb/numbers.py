"""Spark SQL expressions over a DynamoDB number's exact text (an ``N`` value, built-in functions
only): its digits, whether it fits ``bigint`` or a ``decimal(p,s)`` exactly, and its one canonical
text (numeric keys).
"""

from __future__ import annotations

_NUMBER = "'^-?([0-9]*)[.]?([0-9]*)(?:[eE]([+-]?[0-9]+))?$'"
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_PLAIN_NUMBER = "'^-?[0-9]+([.][0-9]+)?$'"


def number_digits(text: str) -> tuple[str, str]:
    """(integer digits, fractional digits) of a number's exact text; nulls when it is not one.

    ``1200`` -> (4, 0), ``0.0012`` -> (0, 4), ``1.5E+3`` -> (4, 0), ``1E-130`` -> (0, 130).
    Plain numbers (DynamoDB's usual form) take string functions only; the exponent form a regular
    expression.
    """
    unsigned = f"(case when startswith({text}, '-') then substr({text}, 2) else {text} end)"
    dot = f"instr({unsigned}, '.')"
    plain_whole = f"(case when {dot} > 0 then substr({unsigned}, 1, {dot} - 1) else {unsigned} end)"
    plain_fraction = f"(case when {dot} > 0 then substr({unsigned}, {dot} + 1) else '' end)"
    plain_integer = f"length(trim(LEADING '0' FROM {plain_whole}))"
    plain_fractional = f"length(trim(TRAILING '0' FROM {plain_fraction}))"

    whole = f"regexp_extract({text}, {_NUMBER}, 1)"
    fraction = f"regexp_extract({text}, {_NUMBER}, 2)"
    exponent = f"coalesce(cast(nullif(regexp_extract({text}, {_NUMBER}, 3), '') as int), 0)"
    digits = f"concat({whole}, {fraction})"
    significant = f"regexp_replace({digits}, '^0+', '')"
    point = f"(length({whole}) + {exponent} - (length({digits}) - length({significant})))"
    kept = f"length(regexp_replace({significant}, '0+$', ''))"
    valid = f"coalesce({text} rlike {_NUMBER} and {text} rlike '[0-9]', false)"
    plain = f"coalesce({text} rlike {_PLAIN_NUMBER}, false)"
    integer = (
        f"(case when {plain} then {plain_integer} when not {valid} then null "
        f"when {kept} = 0 then 0 else greatest({point}, 0) end)"
    )
    fractional = (
        f"(case when {plain} then {plain_fractional} when not {valid} then null "
        f"when {kept} = 0 then 0 else greatest({kept} - {point}, 0) end)"
    )
    return integer, fractional


def fraction_digits(text: str) -> str:
    """The number's fractional digits (``fits_*`` need only these); null when it is not a number.

    Compact on purpose: an item with hundreds of number attributes puts one copy per attribute
    into the plan, and Spark's analysis time grows with the expression tree.
    """
    plain = f"coalesce({text} rlike {_PLAIN_NUMBER}, false)"
    plain_fraction = (
        f"(case when instr({text}, '.') > 0 "
        f"then length(trim(TRAILING '0' FROM substring_index({text}, '.', -1))) else 0 end)"
    )
    whole = f"regexp_extract({text}, {_NUMBER}, 1)"
    significant = (
        f"regexp_replace(concat({whole}, regexp_extract({text}, {_NUMBER}, 2)), '0+$', '')"
    )
    exponent = f"coalesce(cast(nullif(regexp_extract({text}, {_NUMBER}, 3), '') as int), 0)"
    valid = f"coalesce({text} rlike {_NUMBER} and {text} rlike '[0-9]', false)"
    return (
        f"(case when {plain} then {plain_fraction} when not {valid} then null "
        f"else greatest(length({significant}) - length({whole}) - {exponent}, 0) end)"
    )


def canonical_number(text: str) -> str:
    """A number's exact text in one form per value, as DynamoDB compares numbers: no exponent,
    no leading or trailing zero, no sign on zero (``2.50`` and ``25E-1`` -> ``2.5``, ``1E+3`` ->
    ``1000``, ``-0`` -> ``0``). Null when ``text`` is not a number DynamoDB accepts (up to 38
    significant digits, magnitude from 1E-130 to under 1E+126). For numeric keys: any key DynamoDB
    holds has exactly one such text, so equal keys are equal texts."""
    whole = f"regexp_extract(num, {_NUMBER}, 1)"
    digits = f"concat({whole}, regexp_extract(num, {_NUMBER}, 2))"
    exponent = f"coalesce(cast(nullif(regexp_extract(num, {_NUMBER}, 3), '') as int), 0)"
    significant = f"regexp_replace({digits}, '^0+', '')"
    parts = (
        f"named_struct('d', regexp_replace({significant}, '0+$', ''), "
        f"'p', length({whole}) + {exponent} - (length({digits}) - length({significant})), "
        "'s', case when startswith(num, '-') then '-' else '' end)"
    )
    plain = (
        "case when x.p >= length(x.d) then concat(x.d, repeat('0', x.p - length(x.d))) "
        "when x.p > 0 then concat(substr(x.d, 1, x.p), '.', substr(x.d, x.p + 1)) "
        "else concat('0.', repeat('0', -x.p), x.d) end"
    )
    formatted = (
        f"transform(array({parts}), x -> case when x.d = '' then '0' "
        f"when length(x.d) <= 38 and x.p between -129 and 126 then concat(x.s, {plain}) end)[0]"
    )
    valid = f"coalesce(num rlike {_NUMBER} and num rlike '[0-9]', false)"
    return _bound(text, f"case when {valid} then {formatted} end")


def _bound(text: str, body: str) -> str:
    """``body`` (over ``num``) with ``num`` bound to ``text``: a one-element ``transform``. Spark
    evaluates a lambda interpreted, so the generated code holds a reference, not the body: an
    item with a thousand number attributes stays within what Janino compiles in a 1 GB heap."""
    return f"transform(array({text}), num -> {body})[0]"


def fits_decimal(text: str, precision: int, scale: int) -> str:
    """Exactly representable in ``decimal(precision, scale)``: no fractional digit beyond the
    scale (so the cast does not round), and the cast does not overflow. Plain numbers that
    visibly fit take a compiled regular expression; others the exact rule."""
    whole, fraction = precision - scale, f"([.][0-9]{{1,{scale}}})?" if scale else ""
    fast = f"^-?[0-9]{{1,{whole}}}{fraction}$" if whole else f"^-?0[.][0-9]{{1,{scale}}}$"
    exact = (
        f"coalesce({fraction_digits('num')} <= {scale} "
        f"and try_cast(num as decimal({precision},{scale})) is not null, false)"
    )
    return f"(coalesce({text} rlike '{fast}', false) or {_bound(text, exact)})"


def fits_long(text: str) -> str:
    """An integer value within ``bigint``'s range (``1.5E+3`` fits, ``3.5`` does not). Up to 18
    digits take a compiled regular expression; others the exact rule."""
    exact = (
        f"coalesce({fraction_digits('num')} = 0 and try_cast(num as decimal(38,0)) "
        f"between {LONG_MIN} and {LONG_MAX}, false)"
    )
    return f"(coalesce({text} rlike '^-?[0-9]{{1,18}}$', false) or {_bound(text, exact)})"
