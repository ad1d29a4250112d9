"""Import a library while some of the modules it imports are deferred until really used.

LanceDB imports its namespace client (``lance_namespace`` and the generated REST client
``lance_namespace_urllib3_client``: ~260 modules of pydantic models and API classes, ~30 MB and
about half of LanceDB's import time) though a directory or object-store connection never uses it.
While `deferring` is active, those modules are stand-ins: a name imported from them is a
`Placeholder` that imports the real module on first use (a call, an attribute, ``isinstance``,
subclassing), and a stand-in turns into the real module in place on the first attribute read
after the window closed, so ``import lance_namespace`` later gets the whole real module. Modules
named in ``real`` (the namespace errors, which LanceDB catches) are imported for real at once.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

_LOAD_LOCK = threading.RLock()
_window = threading.local()  # .open: within `deferring`, in the thread importing
#: One placeholder per name: the deferred packages re-export the same objects under the same
#: names (``lance_namespace`` re-exports the client's models), and a check such as the
#: ``overrides`` package's (is this method's return type the base method's?) compares them.
_placeholders: dict[str, Placeholder] = {}


def _deferring_now() -> bool:
    return getattr(_window, "open", False)


class _StandIn(ModuleType):
    """A module whose code has not run yet; reading a missing name runs it (after the window)."""

    _deferred_spec: ModuleSpec

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if _deferring_now():
            placeholder = _placeholders.setdefault(name, Placeholder(self.__name__, name))
            placeholder.sources.add(self.__name__)
            return placeholder
        return getattr(_load(self), name)


def _load(module: ModuleType) -> ModuleType:
    """Run the real module's code in the stand-in (once, whichever thread asks first)."""
    with _LOAD_LOCK:
        if isinstance(module, _StandIn):
            spec = module._deferred_spec
            module.__class__ = ModuleType
            del module._deferred_spec
            module.__spec__, module.__loader__ = spec, spec.loader
            assert spec.loader is not None
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module.__name__, None)  # a later import tries again, for real
                raise
    return module


class Placeholder:
    """A name imported from a stand-in: the real object, fetched on first use."""

    __slots__ = ("_module", "_name", "_target", "sources")

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name
        self._target: Any = None
        self.sources: set[str] = set()  # every deferred module it was imported from

    def resolve(self) -> Any:
        if self._target is None:
            if _deferring_now():
                raise AttributeError(f"{self._module}.{self._name} is deferred while the importing library loads")
            module = sys.modules.get(self._module) or importlib.import_module(self._module)
            self._target = getattr(_load(module), self._name)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolve(), name)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self.resolve())

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, self.resolve())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.resolve(),)

    def __repr__(self) -> str:
        return f"<deferred {self._module}.{self._name}>"


class _StandInLoader(Loader):
    def __init__(self, spec: ModuleSpec) -> None:
        self.spec = spec

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = _StandIn(spec.name)
        module._deferred_spec = self.spec
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs now: the real code runs on first use."""


class _Finder(MetaPathFinder):
    def __init__(self, roots: tuple[str, ...], real: tuple[str, ...]) -> None:
        self.roots, self.real = roots, real
        self.made: list[_StandIn] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name in self.real or not any(name == r or name.startswith(r + ".") for r in self.roots):
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        package = spec.submodule_search_locations is not None
        stand_in = ModuleSpec(name, _StandInLoader(spec), origin=spec.origin, is_package=package)
        stand_in.submodule_search_locations = spec.submodule_search_locations
        return stand_in


@contextmanager
def deferring(roots: tuple[str, ...], real: tuple[str, ...] = ()) -> Iterator[None]:
    """Within the block, modules under ``roots`` (not yet imported) are stand-ins."""
    if any(root in sys.modules for root in roots):
        yield  # already imported for real: nothing to defer
        return
    finder = _Finder(roots, real)
    sys.meta_path.insert(0, finder)
    _window.open = True
    try:
        yield
    finally:
        _window.open = False
        sys.meta_path.remove(finder)


def is_deferred(name: str) -> bool:
    """Whether ``name`` is imported only as a stand-in whose code has not run."""
    return isinstance(sys.modules.get(name), _StandIn)
