"""Which tables and columns are written: TiCDC's ``[filter] rules`` and ``[sink] column-selectors``.

One transform of table definitions, applied on the driver where the job (and ``encode``/``schemas``/
``check``) resolve them, so the schemas, the registry and the encoders all see the same columns:

* :meth:`TableSelection.admits` - the table filter (last matching rule wins; unmatched tables are left out).
  Rows of tables left out are skipped and counted, never dead-lettered.
* :meth:`TableSelection.apply` - the first column selector whose matcher accepts the table keeps only the
  columns its ``columns`` rules match. As TiCDC (``columnselector.VerifyTables``), the primary key, or else
  one unique key, must survive in full, and a column used by a ``partition = 'columns'`` dispatcher must not
  be dropped; otherwise a :class:`ConfigError` names the table and the column.

>>> from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
>>> t = TableDef(schema_name="shop", table="users", primary_key=("id",), columns=(
...     ColumnDef(name="id", type=MySQLType.INT, nullable=False), ColumnDef(name="ssn", type=MySQLType.TEXT)))
>>> sel = TableSelection.build(filter_rules=["shop.*"], column_selectors=[{"matcher": ["shop.users"],
...                                                                      "columns": ["*", "!ssn"]}])
>>> [c.name for c in sel.apply(t).columns], sel.admits("other", "t")
(['id'], False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.routing.table_filter import ALL_TABLES, ColumnFilter, TableFilter
from avro_registry_sink.table import TableDef


@dataclass(frozen=True)
class _Selector:
    tables: TableFilter
    columns: ColumnFilter
    text: tuple[str, ...]


@dataclass(frozen=True)
class TableSelection:
    """The table filter and the column selectors of a run (plain, frozen data)."""

    table_filter: TableFilter = ALL_TABLES
    selectors: tuple[_Selector, ...] = ()

    @classmethod
    def build(cls, *, filter_rules: Sequence[str] = ("*.*",), column_selectors: Iterable[Any] = (),
              case_sensitive: bool = False) -> TableSelection:
        """From TiCDC's settings (``SinkConfig.filter_rules``, ``.column_selectors``, ``.case_sensitive``)."""
        selectors = []
        for raw in column_selectors:
            matcher, columns = (raw["matcher"], raw["columns"]) if isinstance(raw, Mapping) else (raw.matcher, raw.columns)
            matcher = (matcher,) if isinstance(matcher, str) else tuple(matcher)
            columns = (columns,) if isinstance(columns, str) else tuple(columns)
            selectors.append(_Selector(
                TableFilter.parse(matcher, case_sensitive=case_sensitive, option="column-selectors.matcher"),
                ColumnFilter.parse(columns), columns))
        table_filter = TableFilter.parse(list(filter_rules), case_sensitive=case_sensitive)
        return cls(table_filter, tuple(selectors))

    @classmethod
    def from_config(cls, config: Any) -> TableSelection:
        """From a :class:`~avro_registry_sink.settings.config.SinkConfig`."""
        return cls.build(filter_rules=config.filter_rules, column_selectors=config.column_selectors,
                         case_sensitive=config.case_sensitive)

    @property
    def is_everything(self) -> bool:
        """No filtering and no column selection: the transform is the identity."""
        return not self.selectors and self.table_filter == ALL_TABLES

    def admits(self, schema: str, table: str) -> bool:
        """Whether ``schema.table`` passes ``[filter] rules``."""
        return self.table_filter.matches(schema, table)

    def apply(self, table: TableDef, partition_columns: Sequence[str] = ()) -> TableDef:
        """The table as written: the first matching column selector's columns (the table itself if none)."""
        selector = next((s for s in self.selectors if s.tables.matches(table.schema_name, table.table)), None)
        if selector is None:
            return table
        kept = tuple(c for c in table.columns if selector.columns.matches(c.name))
        if len(kept) == len(table.columns):
            return table
        names = {c.name.lower() for c in kept}
        for column in partition_columns:
            if column.lower() not in names:
                raise ConfigError(
                    f"Column selector {list(selector.text)} leaves out column {column!r} of table "
                    f"{table.qualified_name}, which its dispatcher's partition = 'columns' hashes; keep it or "
                    "change the dispatcher.", option="column-selectors", table=table.qualified_name, column=column)

        def whole(key: Sequence[str]) -> bool:
            return bool(key) and all(c.lower() in names for c in key)

        unique = tuple(uk for uk in table.unique_keys if whole(uk))
        if not whole(table.primary_key) and not unique:
            dropped = [c.name for c in table.columns if c.name.lower() not in names]
            raise ConfigError(
                f"Column selector {list(selector.text)} leaves no primary key or unique key of table "
                f"{table.qualified_name} in full (it drops {', '.join(dropped)}); TiCDC refuses this too: keep the "
                "key columns.", option="column-selectors", table=table.qualified_name, column=dropped[0])
        primary = table.primary_key if whole(table.primary_key) else ()
        return table.model_copy(update={"columns": kept, "primary_key": primary, "unique_keys": unique})

    def dropped(self, table: TableDef, selected: TableDef) -> tuple[str, ...]:
        """Names of the columns ``apply`` left out (what encoders must ignore in row images)."""
        if selected is table:
            return ()
        kept = {c.name for c in selected.columns}
        return tuple(c.name for c in table.columns if c.name not in kept)


#: The identity selection (every table, every column).
EVERYTHING = TableSelection()
