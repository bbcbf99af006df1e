"""Package faces that import a module the first time one of its names is asked for.

A package imports its public names under `TYPE_CHECKING` for type checkers,
each as `Name as Name` (an explicit re-export); at run time `exports` gives
it the module `__getattr__`, `__dir__` and `__all__`, and the hooks load
each name from its home module on first use. Importing the package then
costs nothing, so a Lambda function loads only the modules it touches.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, modules: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`, whose module `package.<m>` holds the names `modules[m]`."""
    namespace = vars(importlib.import_module(package))
    homes = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{homes[name]}"), name)
        namespace[name] = value  # asked once: later lookups find it without this hook
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__, sorted(homes)
