"""A package's re-exported names, imported from their modules when first asked for (PEP 562).

A package that re-exports its modules' main names would import every one of those modules with itself; with
:func:`lazy_exports` it imports a name's module only when the name is first used, so that importing one small
submodule (which imports its package first) stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, home_of: Mapping[str, str], namespace: dict[str, Any],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``home_of`` (name -> its module) is imported
    from its module on first use and kept in ``namespace`` (the package's ``globals()``), so later uses are plain
    lookups.

    >>> getattr_, dir_ = lazy_exports("p", {"dumps": "json"}, namespace := {})
    >>> getattr_("dumps")([1]), "dumps" in namespace, dir_()
    ('[1]', True, ['dumps'])
    """

    def getattr_(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *home_of})

    return getattr_, dir_
