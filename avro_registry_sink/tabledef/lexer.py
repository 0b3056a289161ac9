"""MySQL/TiDB DDL text as statements of tokens: sqlglot's lexer, with MySQL's string escapes re-read.

sqlglot (MySQL dialect) lexes: quoting, backquoted names, comments (``/*! */`` and ``/*T! */`` included),
hex/bit literals and statement boundaries. sqlglot loses MySQL escapes in string literals (``'\\n'`` ->
``n``), so every string token's text is re-read from the source with MySQL's rules. :class:`TokenStream`
is what the DDL reader (:mod:`.ddl`) walks; its errors name the table and the line and column.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from avro_registry_sink.errors import TableDefinitionError

__all__ = ["DIALECT", "Statement", "Tok", "TokenStream", "lex", "split_statements"]

DIALECT = Dialect.get_or_raise("mysql")

# --------------------------------------------------------------------------------------------------
# Tokens: sqlglot's, with MySQL string escapes re-read from the source


_NOT_WORDS = frozenset(
    {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.HEX_STRING, TokenType.BIT_STRING,
     TokenType.NUMBER, TokenType.IDENTIFIER, TokenType.INTRODUCER}
)

_STRING_ESCAPES = {
    "0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\",
    "%": "\\%", "_": "\\_",  # MySQL keeps the backslash of \% and \_ (LIKE patterns)
}


def _unescape(raw: str) -> str:
    """The value of a MySQL string literal as written (``'it''s'``, ``"a\\nb"``, ``N'x'``)."""
    first = min(i for i in (raw.find("'"), raw.find('"')) if i >= 0)
    quote = raw[first]
    body = raw[first + 1 : -1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_STRING_ESCAPES.get(nxt, nxt))  # other escapes: the backslash is dropped
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_word(token: Token, raw: str) -> bool:
    if token.token_type in _NOT_WORDS:
        return False
    return all(part and all(ch.isalnum() or ch in "_$" for ch in part) for part in raw.split())


@dataclass(frozen=True)
class Tok:
    kind: TokenType
    text: str  # identifier: the name; string: its value; word: as written; otherwise the raw text
    word: str | None  # upper-case word for unquoted words and keywords, else None
    line: int
    col: int
    start: int
    end: int
    src: Token  # the sqlglot token (shared by the words of a multi-word keyword such as PRIMARY KEY)


@dataclass
class Statement:
    toks: list[Tok]
    text: str

    @property
    def source(self) -> str:
        if not self.toks:
            return ""
        return self.text[self.toks[0].start : self.toks[-1].end + 1]


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def lex(text: str, begin: int = 0, end: int | None = None) -> list[Tok]:
    end = len(text) if end is None else end
    try:
        tokens = DIALECT.tokenize(text[begin:end])
    except TokenError as exc:
        raise TableDefinitionError(f"The DDL text cannot be tokenized: {exc}", reason=str(exc)) from None
    out: list[Tok] = []
    command_end: int | None = None
    for t in tokens:
        start, stop = t.start + begin, t.end + begin
        raw = text[start : stop + 1]
        if command_end is not None and t.token_type is TokenType.STRING and raw[:1] not in ("'", '"'):
            # sqlglot hands the rest of a "command" statement (RENAME ..., LOCK TABLES ...) over as one
            # STRING token: read that rest as tokens too
            out.extend(lex(text, command_end + 1, stop + 1))
            command_end = None
            continue
        command_end = stop if t.token_type in DIALECT.tokenizer_class.COMMANDS else None
        line, col = _position(text, start)
        src = Token(t.token_type, t.text, t.line, t.col, start, stop, t.comments)
        if t.token_type in (TokenType.STRING, TokenType.NATIONAL_STRING):
            value = _unescape(raw)
            src = Token(t.token_type, value, t.line, t.col, start, stop, t.comments)
            out.append(Tok(t.token_type, value, None, line, col, start, stop, src))
        elif t.token_type is TokenType.IDENTIFIER:
            out.append(Tok(t.token_type, t.text, None, line, col, start, stop, src))
        elif _is_word(t, raw):
            for part in raw.split():  # "PRIMARY KEY", "DOUBLE PRECISION": one sqlglot token, several words
                out.append(Tok(TokenType.VAR, part, part.upper(), line, col, start, stop, src))
        else:
            out.append(Tok(t.token_type, raw, None, line, col, start, stop, src))
    return out


def split_statements(text: str) -> list[Statement]:
    out: list[Statement] = []
    current: list[Tok] = []
    for tok in lex(text):
        if tok.kind is TokenType.SEMICOLON:
            if current:
                out.append(Statement(current, text))
            current = []
        else:
            current.append(tok)
    if current:
        out.append(Statement(current, text))
    return out


class TokenStream:
    """A cursor over one statement's tokens, with the few moves a DDL reader needs."""

    def __init__(self, stmt: Statement, table: str = "") -> None:
        self.toks = stmt.toks
        self.text = stmt.text
        self.table = table
        self.pos = 0

    def peek(self, k: int = 0) -> Tok | None:
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else None

    def word(self, k: int = 0) -> str | None:
        tok = self.peek(k)
        return tok.word if tok is not None else None

    def at(self, *words: str) -> bool:
        return all(self.word(i) == w for i, w in enumerate(words))

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def at_kind(self, kind: TokenType, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind is kind

    def accept_kind(self, kind: TokenType) -> Tok | None:
        if self.at_kind(kind):
            self.pos += 1
            return self.toks[self.pos - 1]
        return None

    def expect_kind(self, kind: TokenType, what: str) -> Tok:
        tok = self.accept_kind(kind)
        if tok is None:
            raise self.error(f"expected {what}")
        return tok

    def at_end(self) -> bool:
        return self.pos >= len(self.toks)

    def at_element_end(self) -> bool:
        return self.at_end() or self.at_kind(TokenType.COMMA) or self.at_kind(TokenType.R_PAREN)

    def name(self, what: str) -> str:
        tok = self.peek()
        if tok is not None and (tok.kind is TokenType.IDENTIFIER or tok.word is not None):
            self.pos += 1
            return tok.text
        raise self.error(f"expected {what}")

    def table_name(self) -> tuple[str | None, str]:
        first = self.name("a table name")
        if self.accept_kind(TokenType.DOT):
            return first, self.name("a table name after the schema name")
        return None, first

    def number(self, what: str) -> int:
        tok = self.expect_kind(TokenType.NUMBER, what)
        try:
            return int(tok.text)
        except ValueError:
            raise self.error(f"expected {what}, an integer") from None

    def skip_balanced(self) -> None:
        """At ``(``: move past the matching ``)``."""
        self.expect_kind(TokenType.L_PAREN, "(")
        depth = 1
        while depth:
            tok = self.peek()
            if tok is None:
                raise self.error("unbalanced parentheses")
            self.pos += 1
            if tok.kind is TokenType.L_PAREN:
                depth += 1
            elif tok.kind is TokenType.R_PAREN:
                depth -= 1

    def skip_element(self) -> None:
        """Move to the next ``,`` or ``)`` outside parentheses (not consumed)."""
        while not self.at_element_end():
            if self.at_kind(TokenType.L_PAREN):
                self.skip_balanced()
            else:
                self.pos += 1

    def error(self, message: str) -> TableDefinitionError:
        tok = self.peek()
        if tok is not None:
            where = f" (line {tok.line}, column {tok.col}, at {self.text[tok.start:tok.end + 1]!r})"
        elif self.toks:
            where = f" (line {self.toks[-1].line}, at the end of the statement)"
        else:
            where = ""
        subject = f"table {self.table}: " if self.table else ""
        return TableDefinitionError(f"Cannot read the DDL of {subject}{message}{where}.", table=self.table or None)


