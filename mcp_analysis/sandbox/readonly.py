"""Which snippets provably leave the interpreter's variables as they were: their dump may be skipped.

After every good call the interpreter dumps the worker's heap, the state a later failing call
rolls back to (and hibernation keeps). For a session holding 20 MB that dump takes hundreds of
milliseconds (bench/state_writes.py), while a call that only looks (``len(rows)``, ``rows[:3]``,
``print(total)``) runs in a millisecond; its dump would differ from the last one only by the
snippet's own source, which monty keeps. Skipping it leaves the last dump as the rollback point,
and it still holds every variable as the call left them.

"Provably" is syntactic and conservative: a snippet qualifies when each statement is an
expression built only from names, constants, attribute and subscript reads, operators, literal
displays, f-strings and calls of a few builtins that never change their arguments (no
comprehension, no starred argument, no ``await``, no other call). That holds only while those
names mean the builtins and reading cannot run user code, so a session is `Purity.lost` for good
once any snippet it ran could change that: it defined a class or set an attribute (user code
behind reads and reprs), bound one of those builtins' names or a name the prelude defines (the
hits' repr runs the prelude's functions), named ``type``, ``property``, ``setattr`` and the like,
named the prelude's private parts or an attribute starting with ``_`` (``_Record(...)``,
``hit.__init__(...)``: a record of the caller's values, which the prelude's repr would consume),
imported from ``collections`` (a ``defaultdict`` read inserts the key), or could not be parsed
here. The prelude itself (our code: its reprs and item reads change nothing) is trusted. A
session restored from a stored dump starts lost: which snippets made it is not known.
"""

from __future__ import annotations

import ast
import builtins
import functools

#: Builtins that read their arguments and change nothing (none consumes an iterator).
PURE_CALLS = frozenset({"len", "print", "repr", "str", "isinstance", "abs", "round", "bool", "int", "float"})
#: Nodes a looking-only expression may hold (besides calls of `PURE_CALLS`).
_READS = (
    ast.Expr,
    ast.Constant,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.keyword,
    ast.Load,
    ast.boolop,
    ast.operator,
    ast.unaryop,
    # Not `in`: it advances an iterator until it finds the value.
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Is,
    ast.IsNot,
)
#: Names whose binding or import makes a later read able to change state.
_DANGEROUS = PURE_CALLS | {"collections", "defaultdict"}
#: Names that make classes or change attributes without a class statement, wherever they appear.
_SUSPECT = frozenset(
    {"type", "property", "setattr", "delattr", "globals", "locals", "vars", "exec", "eval", "__dict__", "__class__"}
)


def parse(code: str) -> ast.Module | None:
    """The snippet's syntax tree (top-level ``await`` allowed, as in the sandbox); None if Python cannot parse it."""
    try:
        tree = compile(code, "<snippet>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree if isinstance(tree, ast.Module) else None


def only_reads(tree: ast.Module) -> bool:
    """Whether every statement of `tree` is an expression that only reads (see the module's docstring)."""
    if not tree.body:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Module):
            continue
        if isinstance(node, ast.Call):
            pure = isinstance(node.func, ast.Name) and node.func.id in PURE_CALLS
            if not pure or any(k.arg == "file" or k.arg is None for k in node.keywords):
                return False
            if any(isinstance(a, ast.Starred) for a in node.args):
                return False
            continue
        if isinstance(node, ast.Name | ast.Attribute | ast.Subscript) and not isinstance(node.ctx, ast.Load):
            return False
        if not isinstance(node, _READS):
            return False
    return True


def prelude_names(tree: ast.Module) -> set[str]:
    """The names a prelude's code depends on: those it binds at its top level, and the builtins it calls."""
    top = {
        n
        for statement in tree.body
        for node in ast.walk(statement)
        for n in _binds(node)
        if n and _top(statement, node)
    }
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return top | (loaded & set(dir(builtins)))


def _top(statement: ast.stmt, node: ast.AST) -> bool:
    """Whether `node` (inside `statement`) binds at module level: the statement itself, or not inside a def."""
    if node is statement:
        return True
    return not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def spoils(tree: ast.Module | None, protected: frozenset[str] = frozenset()) -> bool:
    """Whether running `tree` could make a later looking-only snippet change state (see the module's
    docstring); `protected`: names whose rebinding would (`prelude_names`). An unparsed snippet could."""
    if tree is None:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            return True
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            return True
        if (isinstance(node, ast.Name) and node.id in _SUSPECT) or (
            isinstance(node, ast.Attribute) and node.attr in _SUSPECT
        ):
            return True
        if _reaches_inside(node, protected):
            return True
        if any(name in _DANGEROUS or name in protected for name in _binds(node) if name):
            return True
    return False


def _reaches_inside(node: ast.AST, protected: frozenset[str]) -> bool:
    """Whether `node` names the prelude's private parts or an object's: `_Record(...)` or
    `hit.__init__(...)` build a record from the caller's values (an iterator as its `headings`),
    which the prelude's repr would then consume while the call counts as only looking."""
    if isinstance(node, ast.Name):
        return node.id.startswith("__") or (node.id.startswith("_") and node.id in protected)
    return isinstance(node, ast.Attribute) and node.attr.startswith("_")


def _binds(node: ast.AST) -> list[str | None]:
    """The names one node binds (an import binds its module's top name too, to catch ``collections``)."""
    bound: list[str | None] = []
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        bound.append(node.id)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        bound.append(node.name)
    elif isinstance(node, ast.arg):
        bound.append(node.arg)
    elif isinstance(node, ast.alias):
        bound += [node.asname, node.name.split(".")[0]]
    elif isinstance(node, ast.ImportFrom):
        bound.append((node.module or "").split(".")[0])
    elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        bound.append(node.name)
    elif isinstance(node, ast.Global | ast.Nonlocal):
        bound += node.names
    return bound


@functools.lru_cache(maxsize=4)
def _protected(prelude: str) -> frozenset[str] | None:
    """`prelude_names` of a prelude (parsed once per process, not per session), None if it cannot be parsed."""
    tree = parse(prelude)
    return frozenset(prelude_names(tree)) if tree is not None else None


class Purity:
    """One interpreter's record: may its looking-only snippets skip the dump?"""

    def __init__(self, known: bool, prelude: str | None = None) -> None:
        """`known`: the interpreter starts from nothing (True), not from a dump of unknown snippets;
        `prelude`: the trusted code every fresh interpreter runs first (its names are protected)."""
        protected = _protected(prelude) if prelude else frozenset()
        self.lost = not known or protected is None
        self.protected = protected or frozenset()

    def ran(self, code: str) -> bool:
        """Note a snippet fed to the worker; whether it provably left the variables as they were."""
        tree = parse(code)
        if spoils(tree, self.protected):
            self.lost = True
        return not self.lost and tree is not None and only_reads(tree)
