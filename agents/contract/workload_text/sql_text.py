"""SQL text split into statements the way psql and pgbench split it. Pure Python.

A statement ends at a semicolon outside quotes, comments and parentheses,
and outside the BEGIN ... END body of a `CREATE [OR REPLACE] FUNCTION|PROCEDURE`
(psql's own heuristic in psqlscan.l). Strings ('...', E'...', $tag$...$tag$),
quoted identifiers and comments (--, nested /* */) become single tokens, so a
word inside them never counts. In pgbench scripts (`meta_commands=True`) a
backslash outside quotes starts a meta-command that runs to the end of its line
(continued by a trailing backslash) and ends the SQL command before it; each
meta-command is a statement of its own (one token of kind "meta"), except
`\\gset` and `\\aset`, which belong to the SQL command they end. Statements
are then numbered as pgbench numbers its commands.

Used to run setup SQL one statement at a time, to name the statement that
failed, and to spot statements that are plainly refused before anything runs.
"""

import re
from dataclasses import dataclass

WORD = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z_0-9$\x80-\uffff]*")
NUMBER = re.compile(r"\d[\d.eE_]*")
DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*)?\$")
# E'...' (backslash escapes), B'...', X'...', N'...'; U&'...' is read apart.
STRING_PREFIXES = {"e", "b", "x", "n"}


@dataclass(frozen=True)
class Token:
    """`kind` is word, string, identifier (double-quoted), number, symbol or meta.

    A string's value is the text it stands for: quotes undoubled, E'...' and U&'...'
    escapes decoded (so `E'\\x43OPY'` reads COPY, as the server reads it).
    """

    kind: str
    value: str

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value.lower() in words


@dataclass(frozen=True)
class Statement:
    """One statement: its 1-based number and first line, its text and its tokens."""

    number: int
    line: int
    text: str
    tokens: tuple[Token, ...]

    def summary(self, width: int = 80) -> str:
        """The statement on one line, shortened to `width` characters."""
        flat = " ".join(self.text.split())
        return flat if len(flat) <= width else flat[: width - 3] + "..."


class SqlTextError(ValueError):
    """Text that does not end where SQL can end (an open quote or comment)."""


class _Splitter:
    """One pass over the text; `statements` is filled as terminators are seen."""

    def __init__(self, text: str, meta_commands: bool):
        self.text = text
        self.meta_commands = meta_commands
        self.pos = 0
        self.statements: list[Statement] = []
        self._reset()

    def _reset(self) -> None:
        self.start = self.pos
        self.tokens: list[Token] = []
        self.parens = 0
        self.begin_depth = 0

    def split(self) -> list[Statement]:
        while self.pos < len(self.text):
            self._step()
        self._finish(len(self.text))
        return self.statements

    def _step(self) -> None:
        text, pos = self.text, self.pos
        char = text[pos]
        if char.isspace():
            self.pos = self._space_end(pos)
        elif text.startswith("--", pos):
            end = text.find("\n", pos)
            self.pos = len(text) if end < 0 else end
        elif text.startswith("/*", pos):
            self.pos = self._block_comment_end(pos)
        elif char == ";" and self.parens == 0 and self.begin_depth == 0:
            self._finish(pos)
            self.pos = pos + 1
            self._reset()
        elif char == "\\" and self.meta_commands:
            self._finish(pos)
            self._meta_command(pos)
        else:
            self._token(char)

    def _space_end(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos].isspace():
            pos += 1
        return pos

    def _token(self, char: str) -> None:
        text, pos = self.text, self.pos
        if char == "'":
            self._string(pos, backslashes=False)
        elif char == '"':
            end = self._quoted_end(pos, '"', backslashes=False)
            self._add("identifier", text[pos + 1 : end - 1].replace('""', '"'), end)
        elif char == "$" and (tag := DOLLAR_TAG.match(text, pos)):
            close = text.find(tag.group(), tag.end())
            if close < 0:
                raise SqlTextError(f"unterminated dollar-quoted string at line {self._line(pos)}")
            self._add("string", text[tag.end() : close], close + len(tag.group()))
        elif word := WORD.match(text, pos):
            self._word(word)
        elif number := NUMBER.match(text, pos):
            self._add("number", number.group(), number.end())
        else:
            # A stray ")" does not make every later semicolon part of a parenthesis.
            self.parens = max(0, self.parens + {"(": 1, ")": -1}.get(char, 0))
            self._add("symbol", char, pos + 1)

    def _word(self, word: re.Match[str]) -> None:
        text, end = self.text, word.end()
        prefix = word.group().lower()
        if text.startswith("&'", end) and prefix == "u":
            self._string(end + 1, backslashes=False, unicode=True)
        elif end < len(text) and text[end] == "'" and prefix in STRING_PREFIXES:
            self._string(end, backslashes=prefix == "e")
        else:
            self._track_body(word.group().lower())
            self._add("word", word.group(), end)

    def _string(self, pos: int, backslashes: bool, unicode: bool = False) -> None:
        end = self._quoted_end(pos, "'", backslashes)
        raw = self.text[pos + 1 : end - 1]
        if backslashes:
            value = decode_backslashes(raw)
        elif unicode:
            value = decode_unicode_escapes(raw.replace("''", "'"))
        else:
            value = raw.replace("''", "'")
        self._add("string", value, end)

    def _track_body(self, word: str) -> None:
        """psql's rule: semicolons inside a SQL-standard function body do not end it."""
        if self.parens or not self._creates_routine():
            return
        if word == "begin" or (word == "case" and self.begin_depth):
            self.begin_depth += 1
        elif word == "end" and self.begin_depth:
            self.begin_depth -= 1

    def _creates_routine(self) -> bool:
        words = [token.value.lower() for token in self.tokens[:4] if token.kind == "word"]
        if words[:1] != ["create"]:
            return False
        rest = words[3:4] if words[1:3] == ["or", "replace"] else words[1:2]
        return rest in (["function"], ["procedure"])

    def _add(self, kind: str, value: str, end: int) -> None:
        if not self.tokens:
            self.start = self.pos
        self.tokens.append(Token(kind, value))
        self.pos = end

    def _quoted_end(self, pos: int, quote: str, backslashes: bool) -> int:
        """The index just after the quote closing the one at `pos` (doubled quotes escape)."""
        index = pos + 1
        while index < len(self.text):
            char = self.text[index]
            if backslashes and char == "\\":
                index += 2
            elif char == quote and self.text.startswith(quote * 2, index):
                index += 2
            elif char == quote:
                return index + 1
            else:
                index += 1
        raise SqlTextError(f"unterminated quoted text starting at line {self._line(pos)}")

    def _block_comment_end(self, pos: int) -> int:
        depth, index = 0, pos
        while index < len(self.text):
            if self.text.startswith("/*", index):
                depth, index = depth + 1, index + 2
            elif self.text.startswith("*/", index):
                depth, index = depth - 1, index + 2
                if depth == 0:
                    return index
            else:
                index += 1
        raise SqlTextError(f"unterminated /* comment starting at line {self._line(pos)}")

    def _meta_command(self, pos: int) -> None:
        end = self._meta_command_end(pos)
        name = WORD.match(self.text, pos + 1)
        if name and name.group().lower() not in ("gset", "aset"):
            self._reset()
            self.tokens = [Token("meta", name.group())]
            self._finish(end)
        self.pos = end
        self._reset()

    def _meta_command_end(self, pos: int) -> int:
        while True:
            end = self.text.find("\n", pos)
            if end < 0:
                return len(self.text)
            if not self.text[:end].rstrip("\r").endswith("\\"):
                return end + 1
            pos = end + 1

    def _finish(self, end: int) -> None:
        if not self.tokens:
            return
        text = self.text[self.start : end].rstrip()
        number = len(self.statements) + 1
        line = self._line(self.start)
        self.statements.append(Statement(number, line, text, tuple(self.tokens)))

    def _line(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1


BACKSLASH_ESCAPE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|([0-7]{1,3})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL
)
UNICODE_ESCAPE = re.compile(r"\\(?:\+([0-9A-Fa-f]{6})|([0-9A-Fa-f]{4})|(\\))")
SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def decode_backslashes(raw: str) -> str:
    """An E'...' string's text: its backslash escapes decoded, doubled quotes undoubled."""

    def one(escape: re.Match[str]) -> str:
        hexadecimal, octal, short, long, other = escape.groups()
        if other is not None:
            return SIMPLE_ESCAPES.get(other, other)
        code = int(octal, 8) if octal else int(hexadecimal or short or long, 16)
        return chr(code) if 0 < code <= 0x10FFFF else ""

    return BACKSLASH_ESCAPE.sub(one, raw.replace("''", "'"))


def decode_unicode_escapes(raw: str) -> str:
    """A U&'...' string's text (the default escape character, a backslash)."""

    def one(escape: re.Match[str]) -> str:
        long, short, backslash = escape.groups()
        if backslash:
            return "\\"
        code = int(long or short, 16)
        return chr(code) if 0 < code <= 0x10FFFF else ""

    return UNICODE_ESCAPE.sub(one, raw)


def split_statements(text: str, meta_commands: bool = False) -> list[Statement]:
    """The statements of `text`, in order; raise SqlTextError for an open quote or comment.

    A statement's text runs from its first token to its end, without the semicolon.
    `meta_commands=True` reads pgbench script text (backslash meta-commands).
    """
    return _Splitter(text, meta_commands).split()


def server_side_copy(statement: Statement) -> str | None:
    """What a COPY statement does on the server's host, or None.

    "runs a program on the benchmark host (COPY ... PROGRAM)" or "reads a file
    on the benchmark host (COPY ... FROM 'file')" / "writes a file ... (TO)";
    None for COPY ... FROM STDIN / TO STDOUT and for every other statement.
    """
    tokens = statement.tokens
    if not tokens or not tokens[0].is_word("copy"):
        return None
    depth = 0
    for index, token in enumerate(tokens[1:-1], start=1):
        if token.kind == "symbol":
            depth += {"(": 1, ")": -1}.get(token.value, 0)
        elif depth == 0 and token.is_word("from", "to"):
            return _copy_target(token.value.upper(), tokens[index + 1])
    return None


def _copy_target(direction: str, target: Token) -> str | None:
    if target.is_word("program"):
        return f"runs a program on the benchmark host (COPY ... {direction} PROGRAM)"
    if target.kind == "string":
        verb = "reads" if direction == "FROM" else "writes"
        return f"{verb} a file on the benchmark host (COPY ... {direction} '{target.value}')"
    return None
