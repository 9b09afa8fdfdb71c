"""Where pgbench finds meta-commands in a custom script, as each pgbench version reads it.

pgbench 9.6 and later read a script with psql's SQL lexer (src/fe_utils/psqlscan.l)
and hand every backslash it meets outside quotes and comments to their own word
lexer (src/bin/pgbench/exprscan.l). The rules this module follows:

- A backslash outside string literals, quoted identifiers and comments starts a
  meta-command anywhere on a line (`SELECT 1 \\shell ...` runs \\shell), except
  `\\;` and `\\:`, which put a plain `;` or `:` into the SQL. The command's name is
  the first word after the backslash (blanks are skipped: `\\ shell` is \\shell),
  and the command runs to the end of its line; from pgbench 10, a backslash just
  before a newline (or a CR LF) continues it on the next line, in the name too.
  Names compare case-insensitively (ASCII letters only, as `pg_strcasecmp` does).
- `'...'`: a doubled `''` is a quote; a backslash is a plain character, since pgbench
  always lexes with standard_conforming_strings on. B'', X'', N'' and U&'' strings
  read the same way. `E'...'`: a backslash escapes the next character, so `\\'`
  does not end the string. After a string ends, whitespace holding a newline (and
  `--` comments) followed by `'` continues the same string, escapes and all.
- A prefix letter counts only where a token starts: `xe'..'` is the identifier
  `xe` and a plain string, `:e'..'` the variable `:e` and a plain string. pgbench
  15 and later also read a number and the letters after it as one token, so `1e'..'`
  is a plain string there but an E string up to 14; 15 and later read `1e-` as one
  token (`1e--` opens no comment), and 16 and later allow `_` between digits.
- `$tag$...$tag$` (tag empty or identifier-like without `$`) is opaque; `$1` is a
  parameter, not a quote, and a `$` inside an identifier (`a$b$`) starts nothing.
- `"..."` identifiers double `""`. `--` comments run to the end of the line (a
  `\\n` or `\\r`); `/* */` comments nest.

pgbench 9.2 to 9.5 read a script line by line instead: a line whose first
non-blank character is a backslash is a meta-command, named by its first word, and
every other line is SQL sent as it is. pgbench stops reading a script at a NUL
character; this module reads past it, which can only find more commands.
"""

import bisect
import re
import string
from dataclasses import dataclass

# Character classes of psqlscan.l and exprscan.l; a character above ASCII stands for
# the bytes \200-\377 of its UTF-8 encoding.
HIGH = "\x80-\U0010ffff"
IDENTIFIER_TAIL = rf"[A-Za-z_0-9${HIGH}]*"
IDENTIFIER = re.compile(rf"[A-Za-z_{HIGH}]{IDENTIFIER_TAIL}")
VARIABLE = re.compile(rf":[A-Za-z_0-9{HIGH}]+")
DOLLAR_TAG = re.compile(rf"\$(?:[A-Za-z_{HIGH}][A-Za-z_0-9{HIGH}]*)?\$")
# The string goes on: blanks, at most one -- comment, a newline, then any whitespace or
# -- comments that end in a newline, then a quote.
STRING_CONTINUES = re.compile(r"[ \t\f]*(?:--[^\n\r]*)?[\n\r](?:[ \t\n\r\f]|--[^\n\r]*[\n\r])*'")
# Runs of characters that start nothing the reader cares about.
PLAIN_RUN = re.compile(r"[^-/\\'\"$:.0-9A-Za-z_\x80-\U0010ffff]+")
LINE_END = re.compile(r"[\n\r]")
COMMENT_MARK = re.compile(r"/\*|\*/")
STRING_STOP = re.compile("'")
ESCAPE_STRING_STOP = re.compile(r"['\\]")
DOUBLE_QUOTE = re.compile('"')
# exprscan.l's blanks; a meta-command's words end at them or at a newline.
META_BLANKS = " \t\r\f\v"
META_WORD_END = re.compile(r"[ \t\r\f\v\n]")
CONTINUATION = re.compile(r"\\\r?\n")
# What C's isspace() skips and strtok() splits on in pgbench 9.2 to 9.5.
OLD_BLANKS = " \t\n\r\f\v"
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@dataclass(frozen=True)
class MetaCommand:
    """A meta-command: its name as written (without the backslash) and where its backslash is."""

    name: str
    line: int
    column: int

    @property
    def folded_name(self) -> str:
        """The name as pgbench compares it: ASCII letters lower-cased."""
        return self.name.translate(ASCII_LOWER)


@dataclass(frozen=True)
class Reading:
    """How a range of pgbench versions reads a script (`first` and `last` as specs write them)."""

    first: str
    last: str
    by_lines: bool = False
    continued_meta_lines: bool = True
    numbers_take_letters: bool = True
    underscores_in_numbers: bool = True

    def number_pattern(self) -> re.Pattern[str]:
        """A number token: its digits, exponent and, from pgbench 15, trailing letters."""
        digits = "[0-9](?:_?[0-9])*" if self.underscores_in_numbers else "[0-9]+"
        mantissa = rf"(?:{digits}(?:\.(?:{digits})?)?|\.{digits})"
        if not self.numbers_take_letters:
            return re.compile(rf"{mantissa}(?:[eE][-+]?{digits})?")
        letters = rf"[A-Za-z_{HIGH}]{IDENTIFIER_TAIL}"
        return re.compile(rf"{mantissa}(?:[eE][-+]?{digits}(?:{letters})?|[eE][-+]|{letters})?")

    def parameter_pattern(self) -> re.Pattern[str]:
        """A positional parameter `$1`, with trailing letters from pgbench 15."""
        if not self.numbers_take_letters:
            return re.compile(r"\$[0-9]+")
        return re.compile(rf"\$[0-9]+(?:[A-Za-z_{HIGH}]{IDENTIFIER_TAIL})?")


READINGS: tuple[Reading, ...] = (
    Reading("9.2", "9.5", by_lines=True),
    Reading(
        "9.6",
        "9.6",
        continued_meta_lines=False,
        numbers_take_letters=False,
        underscores_in_numbers=False,
    ),
    Reading("10", "14", numbers_take_letters=False, underscores_in_numbers=False),
    Reading("15", "15", underscores_in_numbers=False),
    Reading("16", "18"),
)


def reading_for(version: str) -> Reading:
    """How pgbench `version` ("9.6.24", "16.15", "17") reads scripts."""
    for reading in reversed(READINGS):
        if _version_key(version) >= _version_key(reading.first):
            return reading
    raise ValueError(f"no pgbench before 9.2 reads custom scripts: {version}")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


def meta_commands(text: str, reading: Reading) -> list[MetaCommand]:
    """The meta-commands pgbench versions of `reading` find in `text`, in order."""
    if reading.by_lines:
        return _line_meta_commands(text)
    lexer = _Lexer(text, reading)
    lexer.run()
    line_starts = [0] + [match.end() for match in re.finditer("\n", text)]
    found = []
    for offset, name in lexer.found:
        line = bisect.bisect_right(line_starts, offset)
        found.append(MetaCommand(name, line, offset - line_starts[line - 1] + 1))
    return found


def _line_meta_commands(text: str) -> list[MetaCommand]:
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        start = len(line) - len(line.lstrip(OLD_BLANKS))
        if line.startswith("\\", start):
            name = re.split(f"[{OLD_BLANKS}]+", line[start + 1 :].strip(OLD_BLANKS))[0]
            if name:
                found.append(MetaCommand(name, number, start + 1))
    return found


class _Lexer:
    """One pass of psqlscan.l's rules; `found` collects (offset of the backslash, name)."""

    def __init__(self, text: str, reading: Reading):
        self.text = text
        self.reading = reading
        self.number = reading.number_pattern()
        self.parameter = reading.parameter_pattern()
        self.pos = 0
        self.found: list[tuple[int, str]] = []

    def run(self) -> None:
        while self.pos < len(self.text):
            self._step()

    def _step(self) -> None:
        text, pos = self.text, self.pos
        char, following = text[pos], text[pos + 1 : pos + 2]
        if plain := PLAIN_RUN.match(text, pos):
            self.pos = plain.end()
        elif text.startswith("--", pos):
            self.pos = _find(LINE_END, text, pos)
        elif text.startswith("/*", pos):
            self._block_comment()
        elif char == "\\":
            self._backslash()
        elif char == "'":
            self._string(STRING_STOP)
        elif char in "eE" and following == "'":
            self.pos += 1
            self._string(ESCAPE_STRING_STOP)
        elif char == '"':
            self._quoted_identifier()
        elif char == "$":
            self._dollar()
        elif char == ":":
            self._colon()
        else:
            token = IDENTIFIER.match(text, pos) or self.number.match(text, pos)
            self.pos = token.end() if token else pos + 1

    def _block_comment(self) -> None:
        depth, pos = 1, self.pos + 2
        while depth and (mark := COMMENT_MARK.search(self.text, pos)):
            depth += 1 if mark.group() == "/*" else -1
            pos = mark.end()
        self.pos = pos if not depth else len(self.text)

    def _string(self, stop: re.Pattern[str]) -> None:
        """From the opening quote at `pos` to just after the closing one (or the end)."""
        text, pos = self.text, self.pos + 1
        while (found := stop.search(text, pos)) is not None:
            pos = found.start()
            if text[pos] == "\\" or text.startswith("''", pos):
                pos += 2
            elif continued := STRING_CONTINUES.match(text, pos + 1):
                pos = continued.end()
            else:
                self.pos = pos + 1
                return
        self.pos = len(text)

    def _quoted_identifier(self) -> None:
        text, pos = self.text, self.pos + 1
        while True:
            pos = _find(DOUBLE_QUOTE, text, pos)
            if not text.startswith('""', pos):
                self.pos = pos + 1
                return
            pos += 2

    def _dollar(self) -> None:
        text, pos = self.text, self.pos
        if tag := DOLLAR_TAG.match(text, pos):
            close = text.find(tag.group(), tag.end())
            self.pos = len(text) if close < 0 else close + len(tag.group())
        elif parameter := self.parameter.match(text, pos):
            self.pos = parameter.end()
        else:
            self.pos += 1

    def _colon(self) -> None:
        if self.text.startswith("::", self.pos):
            self.pos += 2
        elif variable := VARIABLE.match(self.text, self.pos):
            self.pos = variable.end()
        else:
            self.pos += 1

    def _backslash(self) -> None:
        start = self.pos
        if self.text.startswith((";", ":"), start + 1):
            self.pos += 2
            return
        self.pos += 1
        name = self._meta_word()
        if name:
            self.found.append((start, name))
            self._skip_meta_line()

    def _meta_word(self) -> str:
        """The next word of a meta-command, or "" at its end (the newline then consumed)."""
        text, continued = self.text, self.reading.continued_meta_lines
        while self.pos < len(text):
            if text[self.pos] in META_BLANKS:
                self.pos += 1
            elif continued and (continuation := CONTINUATION.match(text, self.pos)):
                self.pos = continuation.end()
            elif text[self.pos] == "\n":
                self.pos += 1
                return ""
            else:
                break
        start = self.pos
        end = _find(META_WORD_END, text, start)
        if continued and end - start > 1 and (continuation := CONTINUATION.match(text, end - 1)):
            self.pos = continuation.end()
            return text[start : end - 1]
        self.pos = end
        return text[start:end]

    def _skip_meta_line(self) -> None:
        """Past the newline that ends the meta-command, continued lines included."""
        text, pos = self.text, self.pos
        while (newline := text.find("\n", pos)) >= 0:
            continues = text[newline - 1] == "\\" or text[newline - 2 : newline] == "\\\r"
            if not (self.reading.continued_meta_lines and continues):
                self.pos = newline + 1
                return
            pos = newline + 1
        self.pos = len(text)


def _find(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where `pattern` next matches at or after `pos`, or len(text)."""
    found = pattern.search(text, pos)
    return found.start() if found else len(text)
