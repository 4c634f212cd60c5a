"""Tokenizer of dimension expressions: text -> ``(kind, value)`` tokens.

One regular expression scans the whole text; a token is an integer literal (``TOK_INT``, its
``int`` value), a name (``TOK_NAME``, e.g. ``batch`` or ``decoder_input_ids.45_dim_1``), an
operator or punctuation (``TOK_OP``: ``// /: ** - + * / % ^ & ( ) ,``) and the list ends with
one ``TOK_END`` token. :mod:`._parse_tree` builds the raw tree from these tokens.
"""

from __future__ import annotations

import re

from onnx_symdims.expr._atoms import INT64_MAX, ExprSyntaxError

__all__ = ["NAME_RE", "TOK_END", "TOK_INT", "TOK_NAME", "TOK_OP", "position", "tokenize"]

# One token per match, leading whitespace skipped; ``bad`` catches any other character so
# that one C-level ``findall`` scans the whole text. Digits and letters are ASCII only so that
# int() never sees a non-ASCII digit. Two-character operators come before their prefixes.
_TOKEN_RE = re.compile(
    r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_.]*)|(//|/:|\*\*|[-+*/%^&(),])|(\S))"
)
# A whole text that is one name: the most common ``dim_param``, read without the parser.
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

# Token kinds.
TOK_INT, TOK_NAME, TOK_OP, TOK_END = 0, 1, 2, 3


def position(text: str, index: int) -> int:
    """Character offset of token ``index`` (computed only for error messages)."""
    for i, m in enumerate(_TOKEN_RE.finditer(text)):
        if i == index:
            return m.end() - len(m.group(m.lastindex))  # type: ignore[arg-type]
    return len(text)


def _int_literal(digits: str, text: str) -> int:
    # int() refuses > 4300 digits; anything past 20 significant digits is too big anyway.
    significant = digits.lstrip("0")
    value = int(significant or "0") if len(significant) <= 20 else INT64_MAX + 2
    if value > INT64_MAX + 1:
        raise OverflowError(
            f"Integer literal {digits} is outside int64 in expression {text!r}"
        )
    return value


def tokenize(text: str) -> list[tuple[int, object]]:
    """Splits ``text`` into ``(kind, value)`` tokens, ending with an END token.

    Raises:
        ExprSyntaxError: on a character that starts no token.
        OverflowError: on an integer literal larger than 2**63 (2**63 itself is let through
            so that ``-9223372036854775808`` can be written; the parser checks it).
    """
    tokens: list[tuple[int, object]] = []
    append = tokens.append
    for number, name, op, bad in _TOKEN_RE.findall(text):
        if op:
            append((TOK_OP, op))
        elif name:
            append((TOK_NAME, name))
        elif number:
            append((TOK_INT, _int_literal(number, text)))
        else:
            raise ExprSyntaxError(
                f"Unexpected character {bad!r} at position {position(text, len(tokens))} "
                f"in expression {text!r}"
            )
    append((TOK_END, None))
    return tokens
