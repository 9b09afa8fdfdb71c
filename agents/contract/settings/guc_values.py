"""Parse postgresql.conf values exactly as PostgreSQL's GUC code does.

Pure Python (the web tier uses it too). Follows guc.c: `parse_bool`,
`parse_int` (strtol with octal/hex, or strtod when the number has a fraction
or exponent, then rounding), `parse_real` (strtod) and `convert_to_base_unit`
(case-sensitive unit names, fractions rounded to the next smaller unit).
Each parser returns the parsed value or raises ValueError with a message that
says what is wrong, written to be shown to a person.
"""

import math
import re

_BLOCK_UNIT = re.compile(r"^(\d*)(B|kB|MB)$")
_BYTES = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
MEMORY_UNITS = ("TB", "GB", "MB", "kB", "B")
_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
TIME_UNITS = ("d", "h", "min", "s", "ms", "us")

# strtol(value, &end, 0): optional whitespace and sign, then hex, octal or decimal.
_C_INTEGER = re.compile(r"\s*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
# strtod: decimal with optional fraction and exponent, or infinity / nan.
_C_REAL = re.compile(r"\s*[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf(inity)?|nan)", re.IGNORECASE)
_SPACE = " \t\n\r\f\v"


def unit_kind(unit: str | None) -> str | None:
    """ "memory", "time" or None for a pg_settings unit such as "8kB", "ms" or ""."""
    if not unit:
        return None
    if unit in _MS:
        return "time"
    if _BLOCK_UNIT.match(unit):
        return "memory"
    return None


def unit_size(unit: str) -> float:
    """Size of one pg_settings unit in bytes ("8kB" -> 8192) or milliseconds ("s" -> 1000)."""
    if unit in _MS:
        return _MS[unit]
    match = _BLOCK_UNIT.match(unit)
    if match is None:
        raise ValueError(f"unknown unit {unit!r}")
    return int(match.group(1) or 1) * _BYTES[match.group(2)]


def _allowed_units_hint(kind: str) -> str:
    units = list(reversed(MEMORY_UNITS)) if kind == "memory" else list(reversed(TIME_UNITS))
    quoted = [f'"{unit}"' for unit in units]
    return f"valid units for this setting are {', '.join(quoted[:-1])} and {quoted[-1]}"


def _convert_unit(value: float, unit_text: str, setting_unit: str) -> float:
    """`value` given in `unit_text` ("MB"), expressed in the setting's own unit ("8kB")."""
    kind = unit_kind(setting_unit)
    unit_text = unit_text.rstrip(_SPACE)
    if kind is None:
        raise ValueError("this setting does not accept a unit")
    table = {unit: float(_BYTES[unit]) for unit in MEMORY_UNITS} if kind == "memory" else _MS
    order = MEMORY_UNITS if kind == "memory" else TIME_UNITS
    if unit_text not in table:
        raise ValueError(f'invalid unit "{unit_text}": {_allowed_units_hint(kind)}')
    base = unit_size(setting_unit)
    converted = value * table[unit_text] / base
    # Like PostgreSQL, round a fraction ("1.5GB") to the next smaller unit.
    position = order.index(unit_text)
    if position + 1 < len(order):
        smaller = table[order[position + 1]] / base
        converted = _rint(converted / smaller) * smaller
    return converted


def _rint(value: float) -> float:
    """C rint() in the default rounding mode: halves go to the even neighbour."""
    return float(round(value)) if math.isfinite(value) else value


def _split_real(text: str) -> tuple[float, str]:
    match = _C_REAL.match(text)
    if match is None:
        raise ValueError("is not a number")
    number = match.group(0).strip(_SPACE)
    value = float(number)
    if math.isnan(value):
        raise ValueError("is not a number")
    overflow = math.isinf(value) and "inf" not in number.lower()
    mantissa = re.split("[eE]", number)[0]
    underflow = value == 0.0 and any(digit in "123456789" for digit in mantissa)
    if overflow or underflow:
        raise ValueError("is out of the range of a number")
    return value, text[match.end() :]


def _c_integer(literal: str) -> int:
    """strtol(literal, NULL, 0): a leading 0x means hex, a leading 0 means octal."""
    sign = -1 if literal.startswith("-") else 1
    digits = literal.lstrip("+-")
    if digits[:2].lower() == "0x":
        return sign * int(digits[2:], 16)
    return sign * int(digits, 8 if digits.startswith("0") else 10)


def _split_integer(text: str) -> tuple[float, str]:
    match = _C_INTEGER.match(text)
    if match is None:
        # strtol read nothing, so its end pointer is the start of the text.
        if text[:1] == ".":
            return _split_real(text)
        raise ValueError("is not a number")
    rest = text[match.end() :]
    if rest[:1] in (".", "e", "E"):
        return _split_real(text)
    return float(_c_integer(match.group(0).strip(_SPACE))), rest


def _apply_unit(value: float, rest: str, unit: str | None) -> float:
    rest = rest.lstrip(_SPACE)
    if rest:
        if not unit:
            raise ValueError("is not a plain number (this setting takes no unit)")
        value = _convert_unit(value, rest, unit)
    return value


def parse_integer(text: str, unit: str | None) -> int:
    """An integer setting's value in its own unit: "1GB" with unit "8kB" -> 131072.

    The result is not bounded here: callers check it against the setting's
    min_val and max_val, which lie inside PostgreSQL's int range.
    """
    value, rest = _split_integer(text)
    value = _rint(_apply_unit(value, rest, unit))
    if math.isinf(value):
        raise ValueError("is not a finite number")
    return int(value)


def parse_real(text: str, unit: str | None) -> float:
    """A real setting's value in its own unit: "1s" with unit "ms" -> 1000.0."""
    value, rest = _split_real(text)
    return _apply_unit(value, rest, unit)


# (word, meaning, shortest accepted prefix): "o" alone is ambiguous between on and off.
_BOOL_WORDS = (
    ("true", True, 1),
    ("false", False, 1),
    ("yes", True, 1),
    ("no", False, 1),
    ("on", True, 2),
    ("off", False, 2),
)


def parse_bool(text: str) -> bool:
    """PostgreSQL's parse_bool: on/off, true/false, yes/no, 1/0 and unique prefixes."""
    lowered = text.lower()
    if lowered in ("1", "0"):
        return lowered == "1"
    for word, meaning, shortest in _BOOL_WORDS:
        if len(lowered) >= shortest and word.startswith(lowered):
            return meaning
    raise ValueError("is not a boolean: use on or off")


def humanize(value: float, unit: str) -> str:
    """A value in a setting's unit, shown in the largest fitting unit: 16 x 8kB -> "128kB"."""
    kind = unit_kind(unit)
    total = value * unit_size(unit)
    if kind == "memory":
        table = [(name, float(_BYTES[name])) for name in MEMORY_UNITS]
    else:
        table = [(name, _MS[name]) for name in TIME_UNITS]
    for name, size in table:
        if abs(total) >= size:
            return f"{total / size:.4g}{name}"
    return f"{total / table[-1][1]:.4g}{table[-1][0]}"
