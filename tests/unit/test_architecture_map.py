"""docs/ARCHITECTURE.md stays true: every code name it quotes exists, and its diagram has every import.

A name in backticks that looks like code is looked up in the source tree,
read with `ast` (only a library's name is imported to find it): a path (`api/errors.py`, relative to
`functions/cairn/` unless it starts at the top of the repository), a dotted
name (`AddressTable.append`, `runtime/methods.METHODS`, `cairn.cdk`), a call
(`container_init()`) or a bare name (`Services`, `_diagnose`). Dotted names
are resolved part by part (a module, then what it defines, then a class's
members); a bare name must be defined, used or spelled in a string somewhere
in the code, since item attributes, error codes and key literals live there.
What is not code (commands, key shapes, expressions, headers, URLs) is
skipped by its shape.

The diagram's nodes are packages or modules of `cairn`; every import between
two nodes must be drawn as an edge (an edge to a package covers its
modules), every edge drawn must be an import, and what is in no node must be
one of the shared modules the text lists.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "functions" / "cairn"
MAP = ROOT / "docs" / "ARCHITECTURE.md"
# Where the code lives: a quoted path starting with one of these is taken from the repository's top.
TOP_LEVEL = ("functions/", "infra/", "tests/", "bench/", "examples/", "docs/", "app.py", "pyproject.toml")
SOURCES = [PACKAGE, ROOT / "infra", ROOT / "tests", ROOT / "bench", ROOT / "app.py", ROOT / "examples"]

# Names the map quotes that are not this repository's code: AWS and library names it explains against.
EXTERNAL = {
    "storage.Store",  # goa-ai's contract, in Go
    "app.resolve",  # Powertools' resolver method, inherited
    "TransactWriteItems",
    "BatchGetItem",
    "GetItem",
    "ConditionCheck",
    "SendEmail",
    "ALL_OLD",
    "STREAM",
}
# Variables the map names by their usual spelling in the code, and the class each holds.
INSTANCES = {"services": "Services", "uow": "UnitOfWork", "waiter": "Waiter", "method": "Method"}


@dataclass
class Module:
    path: Path
    defined: set[str] = field(default_factory=set)  # every def, class, assignment and import in it, at any depth
    members: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # class → its names


def module_name(path: Path) -> str:
    base = path.relative_to(ROOT / "functions" if path.is_relative_to(ROOT / "functions") else ROOT)
    return ".".join(base.with_suffix("").parts).removesuffix(".__init__")


def python_files() -> Iterator[Path]:
    for source in SOURCES:
        paths = [source] if source.suffix == ".py" else sorted(source.rglob("*.py"))
        yield from (path for path in paths if path != Path(__file__).resolve())  # its own examples of names


def _targets(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.Tuple | ast.List):
        for element in node.elts:
            yield from _targets(element)


@dataclass
class Index:
    modules: dict[str, Module]
    words: set[str]  # every identifier the code uses, and every word of its strings but docstrings
    strings: set[str]  # its strings, whole (event types such as `email.received`)


def _defined(node: ast.AST) -> list[str]:
    """The names a definition, assignment or import binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [name for target in node.targets for name in _targets(target)]
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return list(_targets(node.target))
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[-1]]
    return []


def _used(node: ast.AST) -> str | None:
    """The identifier a name, an attribute, a parameter or a keyword argument spells."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.arg | ast.keyword):
        return node.arg
    return None


def _scan(path: Path, index: Index) -> None:
    tree = ast.parse(path.read_text(), str(path))
    module = index.modules[module_name(path)] = Module(path)
    # Strings standing alone as statements: docstrings, whose words are prose. The walk is breadth first,
    # so a statement is met before the string it holds.
    docstrings: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr):
            docstrings.add(node.value)
        names = _defined(node)
        module.defined.update(names)
        index.words.update(names)
        if used := _used(node):
            index.words.add(used)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node not in docstrings:
            index.words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
            index.strings.add(node.value)
            if path.name == "__init__.py":  # a lazy package face names what it offers in strings
                module.defined.add(node.value)
        if isinstance(node, ast.ClassDef):
            module.members[node.name].update(_members(node))


def _members(cls: ast.ClassDef) -> Iterator[str]:
    """A class's methods, attributes and fields, and what its methods set on `self`."""
    for statement in cls.body:
        yield from _defined(statement)
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(statement):
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        yield target.attr


@cache
def index() -> Index:
    found = Index({}, set(), set())
    for path in python_files():
        _scan(path, found)
    return found


def modules_named(name: str) -> list[Module]:
    """Modules or packages whose last name (or dotted tail) is `name`: `inbox` is every `inbox.py`."""
    found = index().modules
    return [module for full, module in found.items() if full == name or full.endswith("." + name)]


def classes_named(name: str) -> list[tuple[Module, str]]:
    return [(module, name) for module in index().modules.values() if name in module.members]


def resolves(parts: list[str], scopes: list[Module] | None = None) -> bool:
    """Whether the dotted `parts` name something: a module, then names it defines, then class members."""
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if scopes is None:
        candidates: list[tuple[Module, str | None]] = [(module, None) for module in modules_named(head)]
        candidates += classes_named(INSTANCES.get(head, head))
    else:
        candidates = []
        for module in scopes:
            prefix = module_name(module.path)
            candidates += [(sub, None) for sub in modules_named(f"{prefix}.{head}")]
            if head in module.defined:
                candidates += [(module, head) if head in module.members else (module, "")]
    for module, cls in candidates:
        if cls is None and resolves(rest, [module]):
            return True
        if cls and (not rest or rest[0] in members_of(cls)):
            return True
        if cls == "" and not rest:
            return True
    return False


def members_of(cls: str) -> set[str]:
    return {name for module in index().modules.values() for name in module.members.get(cls, set())}


def external(dotted: str) -> bool:
    """A library name (`hmac.compare_digest`, `aws_cdk.assertions.Template`), found by importing it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                value = getattr(value, name)
        except AttributeError:
            return False
        return True
    return False


PATH = re.compile(r"[\w./-]+(::\w+)?")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\*?")


def quoted_names() -> list[str]:
    """The map's backticked spans that look like code names, calls reduced to what they call."""
    text = re.sub(r"^```.*?^```", "", MAP.read_text(), flags=re.S | re.M)
    names = []
    for span in re.findall(r"`([^`]+)`", text):
        span = " ".join(span.split())
        span = re.sub(r"^self\.", "", span)
        called = re.fullmatch(r"([\w./]+)\(.*\)", span)
        if called:
            span = called.group(1)
        if span.startswith(("/", ".", "-", "CAIRN_")) or not (PATH.fullmatch(span) or DOTTED.fullmatch(span)):
            continue  # a URL, a suffix, an option, a variable, or no name (an expression, a key, a header)
        if "-" in span and "/" not in span and "." not in span:
            continue  # a header or a key's word: `Retry-After`, `verify-to`
        names.append(span)
    return names


def exists(name: str) -> bool:
    if name in EXTERNAL or name in index().strings:
        return True
    if "/" in name or name.endswith((".py", ".md", ".txt", ".toml")):
        return path_exists(name)
    parts = name.split(".")
    if parts[-1].endswith("*"):  # `keys.legacy_*`: something in `keys` starts so
        stem = parts[-1].rstrip("*")
        return any(any(n.startswith(stem) for n in module.defined) for module in modules_named(".".join(parts[:-1])))
    if len(parts) == 1:
        return name in index().words or bool(modules_named(name)) or importlib.util.find_spec(name) is not None
    return resolves(parts) or external(name)


def path_exists(name: str) -> bool:
    """`api/errors.py`, `api/app.py::create_app`, `runtime/methods.METHODS`, `tests/unit/`, `stdio.py`."""
    name, _, attribute = name.partition("::")
    folder, _, last = name.rpartition("/")
    stem, _, rest = last.partition(".")
    if rest and not re.fullmatch(r"py|md|txt|toml|json", rest.split(".")[0]):
        # A module path followed by what it defines: `runtime/methods.METHODS`.
        name, attribute = f"{folder}/{stem}.py" if folder else f"{stem}.py", rest
    bases = [ROOT] if name.startswith(TOP_LEVEL) else [ROOT / "functions"] if name.startswith("cairn/") else [PACKAGE]
    if "/" not in name.rstrip("/"):  # a file named alone: anywhere in the code
        candidates = [path for source in SOURCES for path in ([source] if source.is_file() else source.rglob(name))]
        candidates += [ROOT / name] if (ROOT / name).exists() else []
    else:
        candidates = [base / name for base in bases if (base / name).exists()]
    if not candidates:
        return False
    if not attribute:
        return True
    for path in candidates:
        module = index().modules.get(module_name(path)) if path.suffix == ".py" else None
        if module and resolves(attribute.split("."), [module]):
            return True
    return False


def test_every_code_name_the_map_quotes_exists() -> None:
    names = quoted_names()
    assert len(names) > 300, "the map quotes hundreds of names: is the extraction broken?"
    missing = sorted({name for name in names if not exists(name)})
    assert missing == [], f"docs/ARCHITECTURE.md names what the code no longer has: {missing}"


def test_the_check_finds_a_name_that_does_not_exist() -> None:
    assert exists("AddressTable.append") and exists("runtime/methods.METHODS") and exists("api/app.py::create_app")
    assert not exists("AddressTable.no_such_method")
    assert not exists("runtime/methods.NO_SUCH_TABLE")
    assert not exists("api/no_such_module.py")
    assert not exists("_no_such_function_anywhere")


# The dependency diagram.

EDGE = re.compile(r"^\s*(\w+)(?:\[\"([^\"]+)\"\])?\s*(-->|-\.[^.]*\.->)\s*(\w+)(?:\[\"([^\"]+)\"\])?", re.M)


@dataclass(frozen=True)
class Diagram:
    nodes: dict[str, tuple[str, ...]]  # node id → the `cairn` modules or packages it stands for
    edges: set[tuple[str, str]]
    over_http: set[tuple[str, str]]  # drawn, but not imports


def diagram() -> Diagram:
    text = MAP.read_text()
    section = text[text.index("## 2. Which way dependencies point") :]
    chart = section[section.index("```mermaid") : section.index("```", section.index("```mermaid") + 3)]
    nodes: dict[str, tuple[str, ...]] = {}
    edges, over_http = set(), set()
    for source, source_label, arrow, target, target_label in EDGE.findall(chart):
        for node, label in ((source, source_label), (target, target_label)):
            label = re.sub(r"\(.*?\)", "", label or node)  # "local (cairn serve)" stands for `local`
            modules = tuple(f"cairn.{name.strip()}" for name in label.split(","))
            nodes.setdefault(node, modules)
        (over_http if "HTTP" in arrow else edges).add((source, target))
    return Diagram(nodes, edges, over_http)


def shared_modules() -> set[str]:
    text = MAP.read_text()
    listed = text[text.index("Every package may also use the shared modules (") :]
    listed = listed[: listed.index(")")]
    return {f"cairn.{name}" for name in re.findall(r"`(\w+)`", listed)}


@cache
def imports() -> frozenset[tuple[str, str]]:
    """(importing module, imported module) for every import between modules of `cairn`, at any depth."""
    known = {module_name(path) for path in PACKAGE.rglob("*.py")}
    found = set()
    for path in PACKAGE.rglob("*.py"):
        importer = module_name(path)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            found.update((importer, target) for target in targets if target in known and target != "cairn")
    return frozenset(found)


def node_of(module: str, chart: Diagram) -> str | None:
    """The node whose module is the longest prefix of `module`."""
    best = None
    for node, names in chart.nodes.items():
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (node, name)
    return best[0] if best else None


def covers(chart: Diagram, source: str, target: str) -> bool:
    """An edge from the source's node (or a node it is part of) to the target's node, or one it is part of."""

    def containing(node: str) -> set[str]:
        return {
            other
            for other, names in chart.nodes.items()
            for name in names
            for mine in chart.nodes[node]
            if mine == name or mine.startswith(name + ".")
        }

    return any((a, b) in chart.edges for a in containing(source) for b in containing(target))


def related(chart: Diagram, a: str, b: str) -> bool:
    """One node is part of the other (`mcp.tools` of `mcp`): their imports are the package's own."""
    return any(x == y or x.startswith(y + ".") or y.startswith(x + ".") for x in chart.nodes[a] for y in chart.nodes[b])


def test_the_diagram_draws_every_import_between_packages() -> None:
    chart, shared = diagram(), shared_modules()
    missing, unplaced = set(), set()
    for importer, imported in imports():
        if importer in shared:
            if imported not in shared:
                missing.add(f"the shared module {importer} imports {imported}")
            continue
        if imported in shared or importer == "cairn":
            continue
        source, target = node_of(importer, chart), node_of(imported, chart)
        for module, node in ((importer, source), (imported, target)):
            if node is None:
                unplaced.add(module)
        if source and target and not related(chart, source, target) and not covers(chart, source, target):
            missing.add(f"{source} --> {target}  ({importer} imports {imported})")
    assert not unplaced, f"in no node of the diagram and not a shared module: {sorted(unplaced)}"
    assert not missing, "edges missing from the diagram:\n" + "\n".join(sorted(missing))


def test_every_edge_drawn_is_an_import() -> None:
    chart = diagram()
    real = {(node_of(a, chart), node_of(b, chart)) for a, b in imports()}
    assert chart.edges - real == set(), "edges drawn that no import makes"
    assert all(module in index().modules for names in chart.nodes.values() for module in names), chart.nodes


def test_the_shared_modules_exist() -> None:
    assert {module for module in shared_modules() if module not in index().modules} == set()


# No loops between packages: dependencies point one way, so each package can be read, tested and
# changed knowing only the packages below it.


def package_of(module: str) -> str:
    """`cairn.runtime.engine` is part of `cairn.runtime`; a top-level module (`cairn.services`) stands alone."""
    return ".".join(module.split(".")[:2])


def package_loops(found: set[tuple[str, str]]) -> list[list[str]]:
    """The groups of packages that import one another, directly or through others, each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported in found:
        if package_of(importer) != package_of(imported):
            graph[package_of(importer)].add(package_of(imported))

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for package in graph.get(todo.pop(), set()) - seen:
                seen.add(package)
                todo.append(package)
        return seen

    reach = {package: reachable(package) for package in list(graph)}
    loops = {
        tuple(sorted(other for other in reach[package] if package in reach.get(other, set())))
        for package in reach
        if package in reach[package]
    }
    return sorted(list(loop) for loop in loops)


def test_the_loop_check_finds_a_loop_through_a_third_package() -> None:
    found = {("cairn.a.x", "cairn.b.y"), ("cairn.b.z", "cairn.c"), ("cairn.c", "cairn.a.w"), ("cairn.a.w", "cairn.d")}
    assert package_loops(found) == [["cairn.a", "cairn.b", "cairn.c"]]
    assert package_loops(found - {("cairn.c", "cairn.a.w")}) == []


def test_no_package_imports_one_that_imports_it() -> None:
    found = imports()
    loops = package_loops(found)
    closing = sorted(
        f"{importer} imports {imported}"
        for loop in loops
        for importer, imported in found
        if package_of(importer) != package_of(imported) and {package_of(importer), package_of(imported)} <= set(loop)
    )
    assert loops == [], "packages that import one another:\n" + "\n".join(closing)
