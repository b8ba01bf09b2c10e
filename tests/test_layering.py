"""The import rules of docs/architecture.md, checked on the source: imports run one way and
the light modules stay light.

Every `import` counts, at module level or inside a function (a lazy import is still a
dependency), so a cycle cannot hide behind "it only happens at run time". An import under
`if TYPE_CHECKING:` names a type for the checker and never runs: it is held to the layers and to the cycle
check like any other (a type that names its caller's module is a loop a reader follows too). A package's
exports (its `_EXPORTS`, archdsl.exports.lazy_exports, and the same names imported under `TYPE_CHECKING`
for editors) are imported on first use: `from archdsl.search import summarize_study` depends on
`archdsl.search.report._summary`, and the package itself depends on none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Installed package name -> folder in the checkout (pyproject's package-dir).
PACKAGES = {"archdsl": "archdsl", "archdsl.search": "search", "archdsl.analysis": "analysis", "archdsl.specs": "specs"}

# Each layer may import itself and the layers above it in this list, never those below.
LAYERS = (
    (
        "archdsl.errors",
        "archdsl.exports",
        "archdsl.markdown",
        "archdsl.files",
        "archdsl.json_text",
        "archdsl.yaml_text",
        "archdsl.outputs",
        "archdsl.kinds",
        "archdsl.ir",
        "archdsl.progress",
        "archdsl.common_settings",
    ),
    ("archdsl.lang", "archdsl.buildup", "archdsl.data", "archdsl.specs"),
    ("archdsl.nn",),
    ("archdsl.run",),
    ("archdsl.analysis",),
    ("archdsl.search",),
    ("archdsl.commands", "archdsl.cli", "archdsl.__main__"),
)
# Neighbours in one layer that must not know each other.
SEPARATE = {"archdsl.data": ("archdsl.lang", "archdsl.buildup"), "archdsl.lang": ("archdsl.data", "archdsl.buildup")}
# Never torch (nor the other heavy libraries), not even inside a function: the language core.
TORCH_FREE = (
    "archdsl.errors",
    "archdsl.exports",
    "archdsl.markdown",
    "archdsl.files",
    "archdsl.ir",
    "archdsl.kinds",
    "archdsl.lang",
    "archdsl.buildup",
    "archdsl.nn.summary",
    "archdsl.nn.timm_cfg",
    "archdsl.search.studies.naming",
    "archdsl.commands._args",
    "archdsl.commands.config_file",
    "archdsl.commands.settings_flags",
    "archdsl.outputs",
    "archdsl.common_settings",
    "archdsl.yaml_text",
)
# Imported when the command line is built (`archdsl check` answers at once): nothing heavy at
# import time; heavy imports happen inside the functions that need them.
LIGHT_AT_IMPORT = (
    "archdsl.cli",
    "archdsl.commands",
    "archdsl.run.recipe",
    "archdsl.search.fidelity.measures",
    "archdsl.search.settings",  # the search's flags are made from its fields; STRATEGIES is listed from it
    # the strategies' registry and the modules it imports: --strategy's choices, without Optuna
    "archdsl.search.walk.registry",
    "archdsl.search.walk.strategy",
    "archdsl.search.walk.buildup_strategy",
    "archdsl.search.walk.sampler_strategies",
    "archdsl.search.walk.keep_rules",
    "archdsl.analysis.sources",  # analyze's and eval's flags are made from its models
    "archdsl.search.studies.proxy",  # its defaults are read by `archdsl study serve --help`
)
HEAVY = ("torch", "torchvision", "timm", "optuna", "matplotlib")


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            if package == "archdsl" and parts and parts[0] in ("search", "analysis", "specs"):
                continue
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _lazy_exports(path: Path) -> dict[str, str]:
    """A package's exports -> the module each is imported from on first use (its `TYPE_CHECKING` imports)."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING" and path.name == "__init__.py":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    found.update({a.asname or a.name: statement.module for a in statement.names})
    return found


EXPORTS = {name: _lazy_exports(path) for name, path in MODULES.items() if path.name == "__init__.py"}


def _names(nodes, *, exports: bool = False) -> set[str]:
    """The modules `nodes` import; with `exports`, also the module each export imported from a package comes
    from (what runs on its first use)."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                lazy = EXPORTS.get(node.module, {}).get(alias.name)
                names.add(full if full in MODULES else node.module)
                if exports and lazy is not None and lazy != node.module:  # an export: its module runs on first use
                    names.add(f"{lazy}.{alias.name}" if f"{lazy}.{alias.name}" in MODULES else lazy)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _imports(path: Path) -> set[str]:
    """Every absolute module name imported anywhere in the file (the most specific known one)."""
    return _names(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _imported(path: Path, *, in_functions: bool) -> set[str]:
    """What the file imports when it runs: not under TYPE_CHECKING, and in its functions only if `in_functions`."""
    found: list[ast.AST] = []

    def visit(nodes) -> None:
        for node in nodes:
            if not in_functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            found.append(node)
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return _names(found, exports=True)


def _import_time(path: Path) -> set[str]:
    """What importing the file imports: module level, not in functions, not under TYPE_CHECKING."""
    return _imported(path, in_functions=False)


def _graph(imports) -> dict[str, set[str]]:
    return {name: {dep for dep in imports(path) if dep in MODULES and dep != name} for name, path in MODULES.items()}


GRAPH = _graph(_imports)  # every import: what the layers are checked on
RUNTIME_GRAPH = _graph(lambda path: _imported(path, in_functions=True))  # the imports that run: cycles


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(name: str) -> int | None:
    for index, prefixes in enumerate(LAYERS):
        if any(_within(name, prefix) for prefix in prefixes):
            return index
    return None  # the lazy `archdsl` package itself


def test_every_module_has_a_layer():
    assert [name for name in MODULES if name != "archdsl" and _layer(name) is None] == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_one_way(name):
    layer = _layer(name)
    if layer is None:
        return
    upward = sorted(dep for dep in GRAPH[name] if (_layer(dep) or 0) > layer)
    assert upward == [], f"{name} imports a later layer: {upward}"
    for owner, others in SEPARATE.items():
        if _within(name, owner):
            crossing = sorted(dep for dep in GRAPH[name] if any(_within(dep, other) for other in others))
            assert crossing == [], f"{name} must not import {crossing}"


def _every_import(path: Path) -> set[str]:
    """Every module the file imports, under `TYPE_CHECKING` and in functions too; but a package's own
    `TYPE_CHECKING` imports, which are its export table (`_names` follows an export to its module)."""
    found: list[ast.AST] = []

    def visit(nodes) -> None:
        for node in nodes:
            if path.name == "__init__.py" and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            found.append(node)
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return _names(found, exports=True)


CYCLE_GRAPH = _graph(_every_import)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A shortest cycle through each strongly connected component of two or more modules (Tarjan's), as
    the list of modules it passes, the first one again at its end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(set(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_shortest_cycle(graph, component) for component in components]


def _shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    best: list[str] = []
    for start in sorted(component):  # breadth first from each module back to itself, within the component
        paths, seen = [[start]], {start}
        while paths and not (best and len(paths[0]) >= len(best)):
            path = paths.pop(0)
            for dep in sorted(graph[path[-1]] & component):
                if dep == start:
                    if not best or len(path) + 1 < len(best):
                        best = [*path, start]
                elif dep not in seen:
                    seen.add(dep)
                    paths.append([*path, dep])
    return best


def test_no_import_cycle_counting_type_only_and_function_imports():
    cycles = [" -> ".join(cycle) for cycle in import_cycles(CYCLE_GRAPH)]
    assert cycles == [], "import cycles (a shortest one per tangle):\n" + "\n".join(cycles)


def test_the_cycle_check_names_a_cycle_through_a_type_only_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    assert "archdsl.search.plan" in CYCLE_GRAPH["archdsl.search.fidelity.trial"]  # a TYPE_CHECKING import
    assert "archdsl.search.plan" not in CYCLE_GRAPH["archdsl.search"]  # the package's export table


def test_every_package_names_its_exports_for_the_type_checker():
    # `_EXPORTS` (what runs) and the `TYPE_CHECKING` imports (what editors follow) list the same names,
    # each from the same module.
    import importlib

    for name, path in MODULES.items():
        if path.name != "__init__.py" or not EXPORTS[name]:
            continue
        table = importlib.import_module(name)._EXPORTS
        runs = {export: where.partition(":")[0] for export, where in table.items()}
        typed = {export: (f"{name}.{export}" if module == name else module) for export, module in EXPORTS[name].items()}
        assert runs == typed, f"{name}: _EXPORTS and its TYPE_CHECKING imports differ"


def test_an_export_imported_from_its_package_depends_on_the_module_that_defines_it():
    # commands/search.py imports `write_report` from the package: report.py runs on first use
    assert "archdsl.search.report.write" in RUNTIME_GRAPH["archdsl.commands.search"]
    assert EXPORTS["archdsl.search"]["summarize_study"] == "archdsl.search.report"
    assert EXPORTS["archdsl.search.report"]["summarize_study"] == "archdsl.search.report._summary"
    # the package itself imports its exports for the type checker only: they are no edge of its own
    assert "archdsl.search.planning" not in RUNTIME_GRAPH["archdsl.search"]


# Import name -> the distributions that provide it, for the extras' modules whose distribution has another name.
NOT_INSTALLED_PROVIDERS = {"grpc": ["grpcio"], "google": ["protobuf"], "psycopg2": ["psycopg2-binary"]}


def _distribution(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_every_imported_distribution_is_declared():
    """Every third-party module archdsl imports (anywhere: module level, functions, TYPE_CHECKING) comes from a
    distribution pyproject.toml declares, as a dependency or in an extra (`pydantic_core` was imported and
    not declared: it arrived only with pydantic)."""
    import importlib.metadata
    import re
    import sys

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"].values()
    requirements = [*project["dependencies"], *(r for extra in extras for r in extra)]
    declared = {_distribution(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in requirements}
    top = {name.split(".")[0] for path in MODULES.values() for name in _imports(path)}
    third_party = sorted(top - set(sys.stdlib_module_names) - {"archdsl"})
    # Where an extra is not installed (the README's [dev] install has no grpc), the modules whose distribution
    # is named otherwise are looked up here; an installed one is asked of its metadata.
    providers = {**NOT_INSTALLED_PROVIDERS, **importlib.metadata.packages_distributions()}
    undeclared = [
        module for module in third_party if not {_distribution(d) for d in providers.get(module, [module])} & declared
    ]
    assert undeclared == [], f"imported, but no declared distribution provides them: {undeclared}"


def test_a_type_only_import_is_held_to_the_layers_and_never_runs():
    # trial names the study's plan for the checker only (the session imports the runner, which imports trial)
    assert "archdsl.search.plan" in GRAPH["archdsl.search.fidelity.trial"]
    assert "archdsl.search.plan" not in RUNTIME_GRAPH["archdsl.search.fidelity.trial"]
    assert "archdsl.search.runner" in RUNTIME_GRAPH["archdsl.search.planning"]  # a lazy import runs: it counts


def _heavy(names: set[str]) -> list[str]:
    return sorted(name for name in names if any(name == h or name.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("name", sorted(n for n in MODULES if any(_within(n, free) for free in TORCH_FREE)))
def test_the_core_never_imports_torch(name):
    assert _heavy(_imports(MODULES[name])) == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if any(_within(n, light) for light in LIGHT_AT_IMPORT)))
def test_command_line_modules_import_nothing_heavy_at_import_time(name):
    assert _heavy(_import_time(MODULES[name])) == []


# docs/architecture.md: within the search, only `measures` builds, trains and analyses a design (and
# loads its data); the other search modules may reach only these outside the torch-free core:
# module -> the names they may import from it (None: any).
SEARCH_GATE = "archdsl.search.fidelity.measures"
HEAVY_AREAS = ("archdsl.nn", "archdsl.run", "archdsl.analysis", "archdsl.data")
SEARCH_SET_UP: dict[str, frozenset[str] | None] = {
    # the dataset's shape, classes and training defaults, without loading it; its name at --image-size
    "archdsl.data": frozenset({"describe", "DatasetInfo", "sized_name", "training_defaults"}),
    # each dataset's card of defaults (plain data), and the count of validation images a split holds out
    "archdsl.data.cards": None,
    "archdsl.data.validation": frozenset({"held_out_count", "parse_val_split"}),
    "archdsl.run": frozenset({"distributed"}),
    "archdsl.run.device": None,
    "archdsl.run.distributed": None,
    "archdsl.run.recipe": None,
    "archdsl.run.loader": frozenset({"derive_seed"}),
    # torch-free arithmetic on the IR: a design over the memory limit is refused before it is built
    "archdsl.nn.summary": frozenset({"DesignTooLarge", "ensure_fits"}),
}


def _heavy_imports(path: Path) -> list[str]:
    """`module` or `module:name` for each import of a heavy area that `SEARCH_SET_UP` does not allow."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(alias.name, None) for alias in node.names]
        else:
            continue
        for module, name in pairs:
            if not any(_within(module, area) for area in HEAVY_AREAS):
                continue
            allowed = SEARCH_SET_UP.get(module, frozenset())
            if allowed is None or (name is not None and name in allowed):
                continue
            found.append(module if name is None else f"{module}:{name}")
    return sorted(found)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, "archdsl.search") and n != SEARCH_GATE))
def test_only_measures_builds_trains_and_analyses_in_the_search(name):
    assert _heavy_imports(MODULES[name]) == []


def test_the_search_rule_sees_what_measures_imports():
    # the check would catch a search module that trained a design itself
    assert "archdsl.run.train:train" in _heavy_imports(MODULES[SEARCH_GATE])


# The public API: what `archdsl` and each package export (their `__all__`), and the small
# dependency-free modules every layer shares. A command may import only these (and its own
# helpers in archdsl.commands), so that nothing a command does is out of a Python user's reach.
PUBLIC = (
    "archdsl",
    "archdsl.analysis",
    "archdsl.search",
    "archdsl.run",
    "archdsl.data",
    "archdsl.lang",
    "archdsl.nn",
    "archdsl.errors",
    "archdsl.files",
    "archdsl.outputs",
    "archdsl.ir",
    "archdsl.progress",
    "archdsl.common_settings",
    "archdsl.yaml_text",
    "archdsl.buildup",
)
# Every module of archdsl.commands, the commands (parse -> call -> print) and their flag helpers
# alike: a new command is held to the rule from its first line.
COMMAND_MODULES = sorted(name.rsplit(".", 1)[1] for name in MODULES if name.startswith("archdsl.commands."))


def _from_imports(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("archdsl"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.startswith("archdsl")]
    return found


def test_every_command_is_checked():
    from archdsl.cli import COMMAND_MODULES as COMMANDS
    from archdsl.cli import command_module

    assert {command_module(command) for command in COMMANDS} <= {f"archdsl.commands.{m}" for m in COMMAND_MODULES}


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_commands_import_only_the_public_api(name):
    import importlib

    path = MODULES[f"archdsl.commands.{name}"]
    outside = []
    for module, imported in _from_imports(path):
        if _within(module, "archdsl.commands"):
            continue
        if module not in PUBLIC:
            outside.append(f"{module}.{imported}")
            continue
        exported = getattr(importlib.import_module(module), "__all__", None)
        if imported and exported is not None and imported not in exported:
            outside.append(f"{module}.{imported} (not in its __all__)")
    assert outside == [], f"archdsl.commands.{name} reaches past the public API: {outside}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if MODULES[n].name == "__init__.py"))
def test_every_package_lists_its_api(name):
    import importlib

    package = importlib.import_module(name)
    assert isinstance(getattr(package, "__all__", None), (list, tuple)), f"{name} has no __all__"
    missing = [export for export in package.__all__ if not hasattr(package, export)]
    assert missing == [], f"{name}.__all__ names what it does not have: {missing}"


FLAG_PARSING = {"ArgumentParser", "add_argument", "parse_args", "parse_known_args", "add_subparsers"}


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if not _within(n, "archdsl.commands") and n != "archdsl.cli")
)
def test_only_the_command_line_parses_flags(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert used & FLAG_PARSING == set(), f"{name} parses flags; that is archdsl.commands' job"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if MODULES[n].name == "__init__.py"))
def test_no_export_is_shadowed_by_a_submodule(name):
    # Importing `pkg.x` sets the attribute `pkg.x` to the module: an export named `x` would then
    # be the module, not the function (`from archdsl.nn import meta_count` gave a module).
    import importlib

    package = importlib.import_module(name)
    shadowed = [
        export
        for export in package.__all__
        if f"{name}.{export}" in MODULES and getattr(package, export) is not importlib.import_module(f"{name}.{export}")
    ]
    assert shadowed == [], f"{name} exports names that are also its submodules: {shadowed}"


def _package_of(name: str) -> str:
    return name.rsplit(".", 1)[0]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.rsplit(".", 1)[-1].startswith("_")))
def test_private_modules_stay_in_their_package(name):
    # A module named `_x` is its package's own (as Optuna keeps them): other packages use what the
    # package exports, so the module can change without breaking them.
    outside = sorted(user for user, deps in GRAPH.items() if name in deps and not _within(user, _package_of(name)))
    assert outside == [], f"{name} is private to {_package_of(name)} but imported by {outside}"


# No forwarders: a module imports a name to use it, and its `__all__` lists what it defines. A name a
# caller needs is imported from the module that defines it; only a package's `__init__` gathers its
# public API from its modules (the curated exports of docs/python.md).
def _assigned(tree: ast.Module) -> set[str]:
    """The names a module binds itself at module level: functions, classes, assignments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _module_level_imports(tree: ast.Module) -> dict[str, int]:
    """The names bound by `from x import y` at module level (under `if` and `try` too) -> line."""
    found: dict[str, int] = {}

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found.update({alias.asname or alias.name: node.lineno for alias in node.names})
            elif isinstance(node, (ast.If, ast.Try)):
                visit(ast.iter_child_nodes(node))
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(tree.body)
    return found


def _all_node(tree: ast.Module) -> ast.AST | None:
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return node
    return None


def _used(tree: ast.Module) -> set[str]:
    """The names the module reads, outside `__all__` (string annotations included)."""
    listing = _all_node(tree)
    skipped = {id(n) for n in ast.walk(listing)} if listing is not None else set()
    used = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            used.add(node.value)  # a quoted annotation, or a name looked up by its string
    return used


def forwarded(source: str, on_purpose: frozenset[str] = frozenset()) -> list[str]:
    """What a module (not a package's `__init__`) forwards: imported names it never uses, and names in its
    `__all__` that it imports rather than defines (but for the names it forwards `on_purpose`)."""
    tree = ast.parse(source)
    imported, used = _module_level_imports(tree), _used(tree) | on_purpose
    imported = {name: line for name, line in imported.items() if name not in on_purpose}
    found = [f"line {line}: {name} (imported, never used)" for name, line in imported.items() if name not in used]
    listing = _all_node(tree)
    if listing is not None:
        listed = [n.value for n in ast.walk(listing) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        own = _assigned(tree)
        found += [
            f"__all__: {name} (imported, not defined here)" for name in listed if name in imported and name not in own
        ]
    return found


# The one forwarder on purpose: optuna_private is where every private Optuna name is reached (so that an
# Optuna upgrade has one file to check); journal_check takes JournalOperation from it, not from Optuna's module.
FORWARDS_ON_PURPOSE = {"archdsl.search._optuna_private": frozenset({"JournalOperation"})}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if MODULES[n].name != "__init__.py"))
def test_no_module_forwards_a_name(name):
    source = MODULES[name].read_text(encoding="utf-8")
    assert forwarded(source, FORWARDS_ON_PURPOSE.get(name, frozenset())) == [], (
        f"{name} forwards names: import them from where they are defined"
    )


def test_the_forwarder_check_sees_a_forwarder():
    source = "from a import b as b\nfrom a import c\nfrom a import d\n__all__ = ['c', 'f']\ndef f():\n    return c, d\n"
    assert forwarded(source) == ["line 1: b (imported, never used)", "__all__: c (imported, not defined here)"]
