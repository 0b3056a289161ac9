"""What a running stream would otherwise make again for every micro-batch: ``mapInArrow`` UDFs, column references.

``DataFrame.mapInArrow`` makes a new UDF on every call: it pickles the function, parses the output DDL on the
JVM and registers a new Python function there, a dozen round trips through py4j. A running stream calls it for
every micro-batch with a function that is the same but for its identity. :func:`map_in_arrow` keeps the UDF of
each recent function by the bytes it pickles to (what Spark would ship): a function that pickles alike is the
same command, so its UDF is used again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["columns", "map_in_arrow"]

_KEPT = 16
_UDFS: OrderedDict[tuple[int, bytes], tuple[Any, Any]] = OrderedDict()  # (context id, command) -> (context, UDF)


def map_in_arrow(df: DataFrame, func: Callable[[Iterator[Any]], Iterator[Any]], ddl: str,
                 names: Sequence[str]) -> DataFrame:
    """``df.select(*names).mapInArrow(func, ddl)``, with the UDF of an earlier call whose ``(func, ddl)``
    pickles to the same bytes."""
    from pyspark.serializers import CloudPickleSerializer
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    context = df.sparkSession.sparkContext
    key = (id(context), CloudPickleSerializer().dumps((func, ddl)))
    kept = _UDFS.get(key)
    if kept is None or kept[0] is not context:
        udf = pandas_udf(func, returnType=ddl, functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)  # type: ignore[call-overload]
        kept = _UDFS[key] = (context, udf)
        while len(_UDFS) > _KEPT:
            _UDFS.popitem(last=False)
    else:
        _UDFS.move_to_end(key)
    selected = df.select(*columns(context, tuple(names)))  # (the function gets every column of its input)
    column = kept[1](*[selected[name] for name in names])
    return DataFrame(selected._jdf.mapInArrow(column._jc, False, None), df.sparkSession)


_COLUMNS: dict[tuple[int, tuple[str, ...]], tuple[Any, list[Any]]] = {}


def columns(context: Any, names: tuple[str, ...]) -> list[Any]:
    """``F.col`` of each name, made once (each ``F.col`` is a few py4j round trips)."""
    from pyspark.sql import functions as F

    kept = _COLUMNS.get((id(context), names))
    if kept is None or kept[0] is not context:
        kept = _COLUMNS[(id(context), names)] = (context, [F.col(name) for name in names])
    return kept[1]
