"""A small parser for the YAML that job files are written in, for `sam submit`'s start-up.

Importing PyYAML costs a short command a fifth of its CPU, and a sweep submits the same kind of
small file a thousand times. This parser reads the plain subset such files use (block mappings
and sequences, flow `[...]`/`{...}` on one line, plain and simple quoted scalars, comments) and
returns exactly what PyYAML's SafeLoader would. Whenever it is not certain of that (anchors,
tags, multi-line scalars, escapes, numbers in forms other than plain decimals, unusual keys,
anything malformed) it returns None and the caller parses with PyYAML, which also gives the
errors. It never raises on any input.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from client.json_value import JsonValue

# YAML 1.1's words for booleans and null as PyYAML resolves them (exact spellings only).
_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_FALSE = frozenset({"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_DIGITS = frozenset("0123456789")
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
# Every character that PyYAML's int, float or timestamp patterns can contain: a plain scalar
# that starts like a number and holds any other character is surely a string (`5m`, `10s`).
_NUMERIC_CHARS = frozenset("0123456789-+_.:xabcdefABCDEFiInNtTZ \t")
# Characters that cannot start a plain scalar, or that this parser leaves to PyYAML.
_NOT_PLAIN_START = frozenset("?:,[]{}#&*!|>'\"%@`<=")
_FLOW_STOP = frozenset(",[]{}")


class _Unsure(Exception):
    """The text is outside the subset (or not valid YAML): PyYAML decides."""


def parse(text: str) -> dict[str, JsonValue] | None:
    """The mapping PyYAML's SafeLoader makes of `text`, or None when not certain of it."""
    try:
        return _parse(text)
    except (_Unsure, IndexError, ValueError, RecursionError):
        return None


def _parse(text: str) -> dict[str, JsonValue]:
    if not text.isascii():
        raise _Unsure
    lines: list[tuple[int, str]] = []
    for raw in text.split("\n"):
        if any(ch < " " for ch in raw):  # tabs, carriage returns, control characters
            raise _Unsure
        content = raw.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        if content.startswith(("---", "...", "%")):
            raise _Unsure
        lines.append((len(raw) - len(content), content))
    if not lines or lines[0][0] != 0:
        raise _Unsure
    value, end = _block(lines, 0)
    if end != len(lines) or not isinstance(value, dict):
        raise _Unsure
    return value


def _block(lines: list[tuple[int, str]], i: int) -> tuple[JsonValue, int]:
    indent, content = lines[i]
    if content == "-" or content.startswith("- "):
        return _sequence(lines, i, indent, indentless=False)
    return _mapping(lines, i, indent)


def _next_at(lines: list[tuple[int, str]], i: int, indent: int) -> str | None:
    """Line i's content when it continues the block at `indent`; None when the block ended."""
    if i >= len(lines) or lines[i][0] < indent:
        return None
    if lines[i][0] > indent:
        raise _Unsure
    return lines[i][1]


def _mapping(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[dict[str, JsonValue], int]:
    result: dict[str, JsonValue] = {}
    while (content := _next_at(lines, i, indent)) is not None:
        key, sep, rest = content.partition(":")
        if not sep or (rest and rest[0] != " "):
            raise _Unsure
        _check_key(key)
        if key in result:
            raise _Unsure  # a duplicate: the job-file loader names it
        rest = rest.strip(" ")
        i += 1
        if rest and not rest.startswith("#"):
            result[key] = _inline(rest)
            if i < len(lines) and lines[i][0] > indent:
                raise _Unsure  # a continued scalar, or an error
        elif i < len(lines) and lines[i][0] > indent:
            result[key], i = _block(lines, i)
        elif i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            result[key], i = _sequence(lines, i, indent, indentless=True)
        else:
            result[key] = None
    return result, i


def _sequence(
    lines: list[tuple[int, str]], i: int, indent: int, *, indentless: bool
) -> tuple[list[JsonValue], int]:
    result: list[JsonValue] = []
    while (content := _next_at(lines, i, indent)) is not None:
        if not content.startswith("- "):
            if indentless:
                break
            raise _Unsure
        item = content[2:].strip(" ")
        if not item or item.startswith("#") or item.startswith("-"):
            raise _Unsure  # a nested block under `-`, or a sequence in a sequence
        if item[0] not in "[{'\"" and ": " in item or item.endswith(":"):
            raise _Unsure  # a mapping inside the sequence
        result.append(_inline(item))
        i += 1
        if i < len(lines) and lines[i][0] > indent:
            raise _Unsure
    return result, i


def _check_key(key: str) -> None:
    if not key or not (key[0].isalpha() or key[0] == "_") or not _KEY_CHARS.issuperset(key):
        raise _Unsure
    if key in _TRUE or key in _FALSE or key in _NULL:
        raise _Unsure  # PyYAML makes such keys booleans or None


def _inline(text: str) -> JsonValue:
    """A value written on the rest of a line (comment included, spaces stripped)."""
    if text[0] in "[{":
        value, pos = _flow(text, 0)
        _expect_end(text, pos)
        return value
    if text[0] in "'\"":
        value, pos = _quoted(text, 0)
        _expect_end(text, pos)
        return value
    cut = text.find(" #")
    plain = (text if cut < 0 else text[:cut]).rstrip(" ")
    if ": " in plain or plain.endswith(":") or plain == "-" or plain.startswith("- "):
        raise _Unsure
    return _plain(plain)


def _expect_end(text: str, pos: int) -> None:
    rest = text[pos:].lstrip(" ")
    if rest and not (rest.startswith("#") and (pos == len(text) or text[pos] == " ")):
        raise _Unsure


def _flow(text: str, pos: int, depth: int = 0) -> tuple[JsonValue, int]:
    """A `[...]` or `{...}` starting at text[pos]; returns (value, position after it)."""
    if depth > 16:
        raise _Unsure
    closing = "]" if text[pos] == "[" else "}"
    pos += 1
    items: list[JsonValue] = []
    mapping: dict[str, JsonValue] = {}
    pos = _skip(text, pos)
    if text[pos] == closing:
        return ([] if closing == "]" else {}), pos + 1
    while True:
        if closing == "}":
            key, pos = _flow_plain(text, pos)
            if text[pos] != ":" or text[pos + 1] != " ":
                raise _Unsure
            _check_key(key)
            if key in mapping:
                raise _Unsure
            pos = _skip(text, pos + 1)
            mapping[key], pos = _flow_node(text, pos, depth)
        else:
            item, pos = _flow_node(text, pos, depth)
            items.append(item)
        pos = _skip(text, pos)
        if text[pos] == closing:
            return (items if closing == "]" else mapping), pos + 1
        if text[pos] != ",":
            raise _Unsure
        pos = _skip(text, pos + 1)
        if text[pos] in ",]}":
            raise _Unsure  # an empty entry or a trailing comma: left to PyYAML


def _flow_node(text: str, pos: int, depth: int) -> tuple[JsonValue, int]:
    ch = text[pos]
    if ch in "[{":
        return _flow(text, pos, depth + 1)
    if ch in "'\"":
        return _quoted(text, pos)
    plain, pos = _flow_plain(text, pos)
    return _plain(plain), pos


def _flow_plain(text: str, pos: int) -> tuple[str, int]:
    """A plain scalar inside [ ] or { }: up to `,`, a bracket, or `: ` (keys)."""
    start = pos
    while text[pos] not in _FLOW_STOP and text[pos] != ":":
        if text[pos] in "#?":
            raise _Unsure
        pos += 1
    if text[pos] == ":" and text[pos + 1] != " ":
        raise _Unsure
    return text[start:pos].rstrip(" "), pos


def _skip(text: str, pos: int) -> int:
    while text[pos] == " ":
        pos += 1
    return pos


def _quoted(text: str, pos: int) -> tuple[str, int]:
    quote = text[pos]
    out = []
    pos += 1
    while True:
        end = text.index(quote, pos)  # no closing quote on this line: ValueError, unsure
        out.append(text[pos:end])
        if quote == "'" and text[end + 1 : end + 2] == "'":
            out.append("'")
            pos = end + 2
            continue
        value = "".join(out)
        if quote == '"' and "\\" in value:
            raise _Unsure  # escapes: left to PyYAML
        return value, end + 1


def _plain(value: str) -> JsonValue:
    """A plain scalar resolved as PyYAML resolves it: str, int, float, bool or None."""
    if not value:
        raise _Unsure  # empty entries are left to PyYAML
    first = value[0]
    if first in _NOT_PLAIN_START:
        raise _Unsure
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if value in _NULL:
        return None
    if first in _DIGITS or first in "-+":
        number = _decimal(value)
        if number is not None:
            return number
        if _NUMERIC_CHARS.issuperset(value):
            raise _Unsure  # maybe an octal, hex, sexagesimal, timestamp or exponent form
        return value
    if first == ".":
        second = value[1:2]
        if not second or second in _DIGITS or second in "_iInN":
            raise _Unsure  # .5, .inf, .nan
    return value


def _decimal(value: str) -> int | float | None:
    """`12`, `-3`, `+4`, `0.5`, `1.5e-3` as PyYAML reads them; None for any other form."""
    body = value[1:] if value[0] in "-+" else value
    whole, dot, rest = body.partition(".")
    if not whole or not _DIGITS.issuperset(whole):
        return None
    if not dot:
        if len(whole) > 1 and whole[0] == "0":
            return None  # octal in YAML 1.1
        return int(value)
    fraction, e, exponent = rest.partition("e") if "e" in rest else rest.partition("E")
    if not _DIGITS.issuperset(fraction):
        return None
    if e and not (len(exponent) > 1 and exponent[0] in "-+" and _DIGITS.issuperset(exponent[1:])):
        return None  # PyYAML wants a signed exponent; `1.0e5` is a string to it
    return float(value)
