"""SQL that runs other SQL, read for the text check: DO blocks, function bodies, EXECUTE.

A DO block's body and a PL/pgSQL or SQL function's body are strings; a
PL/pgSQL `EXECUTE` runs a string built when it runs. The text check
(workload_sql.py) reads them too, so `DO $$ BEGIN EXECUTE 'COPY t FROM
PROGRAM ...'; END $$` is refused like the COPY it hides:

- a body is split into statements, and every COPY in them is checked (a COPY
  may follow BEGIN, THEN or LOOP in PL/pgSQL);
- an EXECUTE's expression is evaluated as far as the text allows: string
  literals, `||`, chr(n), format(), concat(), upper(), lower() and the quote
  functions of literals. What only the running code knows (a variable, a
  column, any other function) stands as UNKNOWN, and the command built is
  read like any SQL, nested DO blocks and EXECUTEs included.

When a value known only at run time could decide what the command does (its
first word, a part of a COPY, the body of a DO block or function it creates),
the check cannot tell, and refuses it: EXECUTE format('CREATE TABLE p%s ...', i)
passes, EXECUTE v or EXECUTE 'COPY t FROM ' || v does not. This is an early,
friendly error and no more: the guards are the workload's non-superuser role
and the sandbox the server runs in.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from agents.contract.workload_text.sql_text import (
    SqlTextError,
    Statement,
    Token,
    server_side_copy,
    split_statements,
)

# Stands for a value only the running code knows; a word character for the tokenizer, so a
# value glued to a word ("p" || i) makes one unknown word.
UNKNOWN = "\ue000"
# SQL inside SQL deeper than this is not followed; the check says it cannot tell.
MAX_DEPTH = 8
BODY_LANGUAGES = ("plpgsql", "sql")
EXECUTE_ENDS = ("into", "using", "loop")
NOT_DYNAMIC = ("on", "function", "procedure")
FORMAT_SPEC = re.compile(r"%(?:(\d+)\$)?-?(\d+|\*)?([sIL%])")
PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_$]*")


@dataclass(frozen=True)
class Hidden:
    """What a statement hides: `reason` completes "statement N ... `...`"; `unreadable`
    when the check cannot tell what it runs, rather than having seen a server-side COPY."""

    reason: str
    unreadable: bool


def hidden_sql(statement: Statement) -> Hidden | None:
    """What the statement's DO block or function body runs that the check refuses, or None."""
    return _in_bodies(statement, depth=0)


def _in_bodies(statement: Statement, depth: int) -> Hidden | None:
    for body in bodies(statement.tokens):
        found = _in_body(body, depth + 1)
        if found is not None:
            return found
    return None


def bodies(tokens: Sequence[Token]) -> Iterator[str]:
    """The SQL or PL/pgSQL bodies a DO or CREATE FUNCTION|PROCEDURE statement holds."""
    if not tokens or not (tokens[0].is_word("do") or _creates_routine(tokens)):
        return
    language = _language(tokens)
    if language is not None and language not in BODY_LANGUAGES:
        return
    body_after = "do" if tokens[0].is_word("do") else "as"
    for index, token in enumerate(tokens[1:], start=1):
        if token.kind == "string" and (body_after == "do" or tokens[index - 1].is_word("as")):
            if not tokens[index - 1].is_word("language"):
                yield token.value
                return


def _creates_routine(tokens: Sequence[Token]) -> bool:
    words = [token.value.lower() for token in tokens[:4] if token.kind == "word"]
    rest = words[3:4] if words[1:3] == ["or", "replace"] else words[1:2]
    return words[:1] == ["create"] and rest in (["function"], ["procedure"])


def _language(tokens: Sequence[Token]) -> str | None:
    for index, token in enumerate(tokens[:-1]):
        if token.is_word("language") and tokens[index + 1].kind in ("word", "string"):
            return tokens[index + 1].value.lower()
    return None


def _in_body(text: str, depth: int) -> Hidden | None:
    """A body's statements: its COPYs, its EXECUTEs and the bodies nested in it."""
    if depth > MAX_DEPTH:
        return Hidden(f"nests SQL in SQL more than {MAX_DEPTH} deep", unreadable=True)
    try:
        statements = split_statements(text)
    except SqlTextError:
        return None  # the server refuses a body that leaves a quote open
    for statement in statements:
        found = _copy_in(statement.tokens) or _in_executes(statement.tokens, depth)
        found = found or _in_bodies(statement, depth)
        if found is not None:
            return found
    return None


def _copy_in(tokens: Sequence[Token]) -> Hidden | None:
    for index, token in enumerate(tokens):
        if token.is_word("copy"):
            reason = server_side_copy(Statement(0, 0, "", tuple(tokens[index:])))
            if reason is not None:
                return Hidden(f"has a COPY in its body that {reason}", unreadable=False)
    return None


def _in_executes(tokens: Sequence[Token], depth: int) -> Hidden | None:
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        # GRANT EXECUTE ON, and a trigger's EXECUTE FUNCTION|PROCEDURE, run no string.
        if token.is_word("execute") and not (following and following.is_word(*NOT_DYNAMIC)):
            found = _in_command(evaluate(_expression(tokens[index + 1 :])), depth + 1)
            if found is not None:
                return found
    return None


def _expression(tokens: Sequence[Token]) -> list[Token]:
    """An EXECUTE's command expression: up to INTO, USING or LOOP outside parentheses."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.kind == "symbol":
            depth += {"(": 1, ")": -1}.get(token.value, 0)
        elif depth == 0 and token.is_word(*EXECUTE_ENDS):
            return list(tokens[:index])
    return list(tokens)


def _in_command(text: str, depth: int) -> Hidden | None:
    """What a command built by EXECUTE runs that the check refuses (UNKNOWN: run-time values)."""
    if depth > MAX_DEPTH:
        return Hidden(f"nests SQL in SQL more than {MAX_DEPTH} deep", unreadable=True)
    try:
        statements = split_statements(text)
    except SqlTextError:
        return None  # the server refuses a command that leaves a quote open
    for statement in statements:
        tokens = statement.tokens
        unknown = any(UNKNOWN in token.value for token in tokens)
        if UNKNOWN in tokens[0].value:
            return Hidden(
                "runs through EXECUTE a command named by a value known only at run time", True
            )
        if tokens[0].is_word("copy") and unknown:
            return Hidden(
                "runs through EXECUTE a COPY whose source or target is known only at run time",
                True,
            )
        if unknown and any(True for _ in bodies(tokens)):
            return Hidden(
                "creates through EXECUTE a DO block or function from values known only at run time",
                True,
            )
        reason = server_side_copy(statement)
        if reason is not None:
            return Hidden(f"builds through EXECUTE a COPY that {reason}", unreadable=False)
        found = _in_bodies(statement, depth)
        if found is not None:
            return found
    return None


def evaluate(tokens: Sequence[Token]) -> str:
    """The text an expression builds, UNKNOWN standing for what only the running code knows."""
    return "".join(_operand(part) for part in _split(tokens, "||"))


def _split(tokens: Sequence[Token], separator: str) -> list[list[Token]]:
    """`tokens` split at `||` or `,` outside parentheses."""
    parts: list[list[Token]] = [[]]
    depth, index = 0, 0
    while index < len(tokens):
        token = tokens[index]
        if token.kind == "symbol":
            depth += {"(": 1, ")": -1}.get(token.value, 0)
        pair = tokens[index + 1] if index + 1 < len(tokens) else None
        if depth == 0 and separator == "||" and _is_bar_pair(token, pair):
            parts.append([])
            index += 2
            continue
        if depth == 0 and separator == "," and token.kind == "symbol" and token.value == ",":
            parts.append([])
        else:
            parts[-1].append(token)
        index += 1
    return parts


def _is_bar_pair(token: Token, following: Token | None) -> bool:
    return (
        token.kind == "symbol"
        and token.value == "|"
        and following is not None
        and following.kind == "symbol"
        and following.value == "|"
    )


def _operand(tokens: list[Token]) -> str:
    tokens = _without_cast(tokens)
    if len(tokens) == 1 and tokens[0].kind in ("string", "number"):
        return tokens[0].value
    if len(tokens) >= 2 and _is_symbol(tokens[0], "(") and _is_symbol(tokens[-1], ")"):
        return evaluate(tokens[1:-1])
    if len(tokens) >= 3 and tokens[0].kind == "word" and _is_symbol(tokens[1], "("):
        if _is_symbol(tokens[-1], ")"):
            arguments = [evaluate(part) for part in _split(tokens[2:-1], ",")]
            return _call(tokens[0].value.lower(), arguments)
    return UNKNOWN


def _without_cast(tokens: list[Token]) -> list[Token]:
    """`'...'::text` as `'...'`: a cast to a text type does not change the text."""
    if len(tokens) >= 3 and _is_symbol(tokens[-3], ":") and _is_symbol(tokens[-2], ":"):
        if tokens[-1].is_word("text", "varchar"):
            return tokens[:-3]
    return tokens


def _is_symbol(token: Token, value: str) -> bool:
    return token.kind == "symbol" and token.value == value


def _call(function: str, arguments: list[str]) -> str:
    """What a string function of known arguments returns; UNKNOWN for any other function."""
    if function == "chr" and len(arguments) == 1 and arguments[0].isdigit():
        code = int(arguments[0])
        return chr(code) if 0 < code <= 0x10FFFF else UNKNOWN
    if function == "concat":
        return "".join(arguments)
    if function == "format" and arguments:
        return _format(arguments[0], arguments[1:])
    if function in ("upper", "lower") and len(arguments) == 1:
        return arguments[0].upper() if function == "upper" else arguments[0].lower()
    if function in ("quote_literal", "quote_nullable") and len(arguments) == 1:
        return _quoted("L", arguments[0])
    if function == "quote_ident" and len(arguments) == 1:
        return _quoted("I", arguments[0])
    return UNKNOWN


def _format(template: str, arguments: list[str]) -> str:
    """PostgreSQL's format(): %s, %I, %L and %%, with argument positions (n$)."""
    pieces, position, following = [], 0, 0
    for spec in FORMAT_SPEC.finditer(template):
        pieces.append(template[position : spec.start()])
        position = spec.end()
        argument, width, kind = spec.groups()
        if kind == "%":
            pieces.append("%")
            continue
        if width == "*":
            return UNKNOWN
        index = int(argument) - 1 if argument else following
        following = index + 1
        value = arguments[index] if 0 <= index < len(arguments) else UNKNOWN
        pieces.append(_quoted(kind, value))
    pieces.append(template[position:])
    return "".join(pieces)


def _quoted(kind: str, value: str) -> str:
    """A value as format's %s, %L or %I (quote_literal, quote_ident) puts it in SQL."""
    if kind == "L":
        return "'" + value.replace("'", "''") + "'"
    if kind == "I" and not PLAIN_IDENTIFIER.fullmatch(value):
        return '"' + value.replace('"', '""') + '"'
    return value
