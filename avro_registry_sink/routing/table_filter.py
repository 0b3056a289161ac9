"""TiCDC's table-filter and column-filter syntax (``[filter] rules``, dispatcher and column-selector matchers).

The syntax is TiDB's ``table-filter`` (used by TiCDC, BR, Lightning, Dumpling):

* a rule is ``schema.table``; each side is a literal name, a wildcard pattern (``*`` any run, ``?`` one
  character, ``[a-z]`` a class, ``[!a-z]`` a negated class), a ``/regex/`` (searched, not anchored), or a
  quoted name (``"a.b"`` or ```a.b```, a doubled quote inside stands for one);
* ``\\`` escapes a special character (escaping a letter or digit is an error, as in TiDB);
* a rule starting with ``!`` excludes; ``#`` starts a comment; ``@file`` reads rules from a file;
* the **last** matching rule decides; a table no rule matches is excluded;
* matching ignores case unless ``case-sensitive = true`` (TiCDC's default since v7.5.0 is false).

Column filters (``columns`` of a column selector) use the same patterns without the ``schema.`` part and
always ignore case, as MySQL column names do.

>>> f = TableFilter.parse(["shop.*", "!shop.tmp_*", "audit.log"])
>>> f.matches("shop", "orders"), f.matches("shop", "tmp_1"), f.matches("Audit", "LOG"), f.matches("x", "y")
(True, False, True, False)
>>> ColumnFilter.parse(["*", "!secret"]).matches("SECRET")
False
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from avro_registry_sink.errors import ConfigError

_REGEXP = re.compile(r"^/(?:\\.|[^/])+/")
_DOUBLE_QUOTED = re.compile(r'^"(?:""|[^"])+"')
_BACKQUOTED = re.compile(r"^`(?:``|[^`])+`")
_RANGE = re.compile(r"^\[!?(?:\\[^0-9a-zA-Z]|[^\\\]])+\]")


@dataclass(frozen=True)
class _Matcher:
    """A literal name (``literal``) or a compiled pattern (``pattern``); ``None`` for both means ``*``."""

    literal: str | None = None
    pattern: re.Pattern[str] | None = None

    def match(self, name: str, fold: bool) -> bool:
        if self.literal is not None:
            return (self.literal.lower() == name.lower()) if fold else self.literal == name
        if self.pattern is None:
            return True
        if fold:
            return re.search(self.pattern.pattern, name, self.pattern.flags | re.IGNORECASE) is not None
        return self.pattern.search(name) is not None


@dataclass(frozen=True)
class _Rule:
    parts: tuple[_Matcher, ...]
    positive: bool


class _RuleParser:
    """Parses rule lines; ``option`` names the setting in every error message."""

    def __init__(self, option: str, parts: int) -> None:
        self.option = option
        self.parts = parts
        self.rules: list[_Rule] = []

    def error(self, rule: str, reason: str) -> ConfigError:
        return ConfigError(f"Invalid {self.option} rule {rule!r}: {reason}.", option=self.option, value=rule)

    def parse(self, line: str, can_import: bool = True) -> None:
        original = line
        line = line.strip(" \t")
        if not line or line.startswith("#"):
            return
        positive = True
        if line[0] == "!":
            positive, line = False, line[1:]
        elif line[0] == "@":
            if not can_import:
                raise self.error(original, "importing filter files recursively is not allowed")
            self._import(line[1:], original)
            return
        matchers = []
        for index in range(self.parts):
            matcher, line = self._pattern(line, original, dotted=self.parts == 2)
            matchers.append(matcher)
            if index + 1 < self.parts:
                if not line:
                    raise self.error(original, "wrong table pattern: expected schema.table")
                if line[0] != ".":
                    raise self.error(original, "syntax error: missing '.' between schema and table patterns")
                line = line[1:]
        if line:
            raise self.error(original, f"syntax error: stray characters {line!r} after the pattern")
        self.rules.append(_Rule(tuple(matchers), positive))

    def _import(self, name: str, original: str) -> None:
        try:
            lines = Path(name).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise self.error(original, f"cannot open filter file {name!r} ({exc.strerror})") from None
        for line in lines:
            self.parse(line, can_import=False)

    def _pattern(self, line: str, original: str, *, dotted: bool) -> tuple[_Matcher, str]:
        if not line:
            raise self.error(original, "syntax error: missing pattern")
        if line[0] == "/":
            found = _REGEXP.match(line)
            if not found:
                raise self.error(original, "syntax error: incomplete regexp")
            return self._compile(line[1:found.end() - 1], original), line[found.end():]
        for quote, expr in (('"', _DOUBLE_QUOTED), ("`", _BACKQUOTED)):
            if line[0] == quote:
                found = expr.match(line)
                if not found:
                    raise self.error(original, "syntax error: incomplete quoted identifier")
                return _Matcher(literal=line[1:found.end() - 1].replace(quote * 2, quote)), line[found.end():]
        return self._wildcard(line, original, dotted=dotted)

    def _wildcard(self, line: str, original: str, *, dotted: bool) -> tuple[_Matcher, str]:
        literal: list[str] = []
        regex: list[str] = []
        is_literal = True
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                if i == len(line) - 1:
                    raise self.error(original, "syntax error: cannot place \\ at end of line")
                escaped = line[i + 1]
                if escaped.isascii() and escaped.isalnum():
                    raise self.error(original, f"cannot escape a letter or number (\\{escaped})")
                literal.append(escaped)
                regex.append(re.escape(escaped))
                i += 2
            elif c == ".":
                if dotted:
                    break
                raise self.error(original, "unexpected special character '.'")
            elif c == "*":
                is_literal = False
                regex.append(".*")
                i += 1
            elif c == "?":
                is_literal = False
                regex.append(".")
                i += 1
            elif c == "[":
                is_literal = False
                found = _RANGE.match(line[i:])
                if not found:
                    raise self.error(original, "syntax error: failed to parse character class")
                body = line[i + 1:i + found.end() - 1]
                if body.startswith("!"):
                    regex.append("[^" + body[1:].replace("[", "\\[") + "]")
                elif body.startswith("^"):
                    regex.append("[\\^" + body[1:].replace("[", "\\[") + "]")
                else:
                    regex.append("[" + body.replace("[", "\\[") + "]")
                i += found.end()
            elif c in "$_" or (c.isascii() and c.isalnum()) or not c.isascii():
                literal.append(c)
                regex.append(re.escape(c))
                i += 1
            else:
                raise self.error(original, f"unexpected special character {c!r}")
        rest = line[i:]
        if is_literal:
            return _Matcher(literal="".join(literal)), rest
        body = "".join(regex)
        if body == ".*":
            return _Matcher(), rest
        return self._compile("^(?:" + body + r")\Z", original, dotall=True), rest

    def _compile(self, expression: str, original: str, *, dotall: bool = False) -> _Matcher:
        try:
            return _Matcher(pattern=re.compile(expression, re.DOTALL if dotall else 0))
        except re.error as exc:
            raise self.error(original, f"invalid pattern ({exc})") from None


def _parse(rules: Iterable[str] | str, option: str, parts: int) -> tuple[_Rule, ...]:
    if isinstance(rules, str):
        rules = [rules]
    parser = _RuleParser(option, parts)
    for rule in rules:
        if not isinstance(rule, str):
            raise ConfigError(f"Invalid {option} rule {rule!r}: rules are strings such as 'db.*'.", option=option)
        parser.parse(rule)
    return tuple(parser.rules)


@dataclass(frozen=True)
class TableFilter:
    """A parsed table filter: :meth:`matches` says whether ``schema.table`` is selected."""

    rules: tuple[_Rule, ...]
    case_sensitive: bool = False

    @classmethod
    def parse(cls, rules: Sequence[str] | str, *, case_sensitive: bool = False,
              option: str = "filter.rules") -> TableFilter:
        """Parse rules (TiCDC's syntax); a syntax error is a :class:`ConfigError` naming ``option``."""
        return cls(_parse(rules, option, 2), case_sensitive)

    def matches(self, schema: str, table: str) -> bool:
        """Whether the last rule matching ``schema.table`` is a positive one."""
        fold = not self.case_sensitive
        for rule in reversed(self.rules):
            if rule.parts[0].match(schema, fold) and rule.parts[1].match(table, fold):
                return rule.positive
        return False


@dataclass(frozen=True)
class ColumnFilter:
    """A parsed column filter (always case-insensitive): :meth:`matches` says whether a column is kept."""

    rules: tuple[_Rule, ...]

    @classmethod
    def parse(cls, rules: Sequence[str] | str, *, option: str = "column-selectors.columns") -> ColumnFilter:
        return cls(_parse(rules, option, 1))

    def matches(self, column: str) -> bool:
        for rule in reversed(self.rules):
            if rule.parts[0].match(column, True):
                return rule.positive
        return False


#: TiCDC's default ``[filter] rules``.
ALL_TABLES = TableFilter.parse(["*.*"])
