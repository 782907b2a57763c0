"""The chat page's own ES modules as one file (``chat/bundle.js``), made by ``collectstatic``
(``neta/static_build.py``): a page load then asks for one script instead of ~60 modules.

The page's modules keep to a small, checked subset of ES module syntax, which makes a
bundler of a few lines enough (and any module that leaves the subset fails the build with
its name and line, never a broken page):

- ``import { a, b as c } from "./x.js";`` (relative: another module of the page),
  ``import name from "bare";`` / ``import { a } from "bare";`` (a vendored library, kept as
  an import of the bundle: the import map resolves it);
- ``export function|async function|class|const|let NAME``, ``export { a, b };``,
  ``export { a } from "./x.js";``.

Each module becomes a function scope that returns its exports, in the order the browser
would evaluate them (depth first, imports in source order): its private names stay
private, its exports are constants of the bundle, which other modules' functions read when
they run (so the one cycle among the modules, messages ↔ subagent_panel, works as in ESM).
Exported names must be unique across the modules; the build says which collide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

IMPORT = re.compile(r'^import\s+(?P<what>[^;"]*?)\s*(?:from\s+)?"(?P<spec>[^"]+)";[ \t]*$', re.M)
EXPORT_FROM = re.compile(r'^export\s*\{(?P<names>[^}]*)\}\s*from\s*"(?P<spec>[^"]+)";[ \t]*$', re.M)
EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\};[ \t]*$", re.M)
EXPORT_DECL = re.compile(r"^export\s+(?P<kind>async\s+function\*?|function\*?|class|const|let)\s+(?P<name>[A-Za-z_$][\w$]*)", re.M)
LEFT = re.compile(r"^(?:import|export)\b.*$", re.M)
NAME = re.compile(r"^[A-Za-z_$][\w$]*$")


class BundleError(ValueError):
    """A module leaves the subset the bundler takes (or two export one name)."""


@dataclass
class Module:
    path: str
    source: str
    relative: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  # (module path, [(imported, local)])
    bare: list[tuple[str, str, str]] = field(default_factory=list)  # (spec, imported or "default", local)
    exports: dict[str, str] = field(default_factory=dict)  # exported name -> local name
    reexported: set[str] = field(default_factory=set)
    body: str = ""


def _names(text: str, where: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        bits = part.split()
        if len(bits) == 1 and NAME.match(bits[0]):
            out.append((bits[0], bits[0]))
        elif len(bits) == 3 and bits[1] == "as" and NAME.match(bits[0]) and NAME.match(bits[2]):
            out.append((bits[0], bits[2]))
        else:
            raise BundleError(f"{where}: cannot read the name list {{{text}}}")
    return out


def _line(source: str, index: int) -> int:
    return source.count("\n", 0, index) + 1


def parse(path: str, source: str) -> Module:
    module = Module(path, source)
    base = PurePosixPath(path).parent

    def norm(spec: str) -> str:
        parts: list[str] = []
        for piece in (base / spec).parts:
            if piece == "..":
                parts.pop()
            elif piece != ".":
                parts.append(piece)
        return "/".join(parts)

    spans = []
    for m in IMPORT.finditer(source):
        where = f"{path}:{_line(source, m.start())}"
        spec, what = m.group("spec"), m.group("what").strip()
        spans.append(m.span())
        if spec.startswith("."):
            target = norm(spec)
            if not what:
                module.relative.append((target, []))
            elif what.startswith("{") and what.endswith("}"):
                module.relative.append((target, _names(what[1:-1], where)))
            else:
                raise BundleError(f"{where}: only named imports of the page's modules ({what!r})")
        else:
            if what.startswith("* "):
                raise BundleError(f"{where}: namespace imports are not taken ({what!r})")
            default, _, named = what.partition("{")
            default = default.strip().rstrip(",").strip()
            if default:
                if not NAME.match(default):
                    raise BundleError(f"{where}: cannot read {what!r}")
                module.bare.append((spec, "default", default))
            if named:
                for imported, local in _names(named.rstrip("}").rstrip().rstrip("}"), where):
                    module.bare.append((spec, imported, local))
    for m in EXPORT_FROM.finditer(source):
        where = f"{path}:{_line(source, m.start())}"
        spans.append(m.span())
        target = norm(m.group("spec"))
        names = _names(m.group("names"), where)
        if any(i != o for i, o in names):
            raise BundleError(f"{where}: a re-export may not rename")
        module.relative.append((target, names))
        module.reexported.update(i for i, _ in names)
    for m in EXPORT_LIST.finditer(source):
        where = f"{path}:{_line(source, m.start())}"
        spans.append(m.span())
        for local, exported in _names(m.group("names"), where):
            module.exports[exported] = local
    for m in EXPORT_DECL.finditer(source):
        module.exports[m.group("name")] = m.group("name")
    # The body: the import and export-list statements out, "export " in front of declarations out.
    pieces, last = [], 0
    for start, end in sorted(spans):
        pieces.append(source[last:start])
        last = end
    pieces.append(source[last:])
    body = EXPORT_DECL.sub(lambda m: m.group(0)[len("export") :].lstrip(), "".join(pieces))
    stray = LEFT.search(body)
    if stray:
        raise BundleError(f"{path}: a statement the bundler does not take: {stray.group(0)[:80]!r}")
    module.body = body
    return module


def bundle(entry: str, read) -> str:
    """The bundle of ``entry`` (a path such as ``chat/main.js``); ``read(path)`` gives a
    module's source (a path relative to the static root)."""
    modules: dict[str, Module] = {}
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(path: str) -> None:
        if state.get(path) is not None:
            return  # done, or in progress (a cycle: it evaluates after the module that reached it)
        state[path] = "open"
        module = modules[path] = parse(path, read(path))
        for target, _ in module.relative:
            visit(target)
        state[path] = "done"
        order.append(path)

    visit(entry)
    owner: dict[str, str] = {}
    for path in order:
        for name in modules[path].exports:
            if name in modules[path].reexported and name not in modules[path].exports.values():
                continue
            if modules[path].exports[name] != name:
                raise BundleError(f"{path}: exports {modules[path].exports[name]} as {name}: renamed exports are not taken")
            local_imports = {local for _, names in modules[path].relative for _, local in names}
            if name in local_imports:
                continue  # an imported name exported again: the same constant
            if name in owner:
                raise BundleError(f"{name} is exported by {owner[name]} and {path}: exported names must be unique")
            owner[name] = path
    bare: dict[str, tuple[str, str]] = {}
    for path in order:
        for spec, imported, local in modules[path].bare:
            if local in owner:
                raise BundleError(f"{path}: {local} from {spec!r} is also exported by {owner[local]}")
            if bare.setdefault(local, (spec, imported)) != (spec, imported):
                raise BundleError(f"{path}: {local} names two things ({bare[local]} and {(spec, imported)})")
    out = [
        "// chat/bundle.js: the chat page's modules in one file, made by collectstatic (neta/chat_bundle.py).",
        "// Sources: static/chat/. Do not edit: edit the modules and collect again.",
    ]
    by_spec: dict[str, list[tuple[str, str]]] = {}
    for local, (spec, imported) in bare.items():
        by_spec.setdefault(spec, []).append((imported, local))
    for spec, names in by_spec.items():
        default = [local for imported, local in names if imported == "default"]
        named = [f"{i} as {l}" if i != l else i for i, l in names if i != "default"]
        parts = ([default[0]] if default else []) + ([f"{{ {', '.join(named)} }}"] if named else [])
        out.append(f'import {", ".join(parts)} from "{spec}";')
    done: set[str] = set()
    for path in order:
        module = modules[path]
        prelude = []
        for target, names in module.relative:
            for imported, local in names:
                if imported != local:
                    if target not in done:
                        raise BundleError(f"{path}: renames {imported} from {target}, which evaluates after it (a cycle)")
                    prelude.append(f"const {local} = {imported};")
                elif imported not in owner and imported not in modules[target].reexported:
                    raise BundleError(f"{path}: imports {imported} from {target}, which does not export it")
        exports = [name for name in module.exports if owner.get(name) == path]
        head = f"const {{ {', '.join(exports)} }} = " if exports else ""
        tail = f"\nreturn {{ {', '.join(exports)} }};" if exports else ""
        out.append(f"// ---- {path}\n{head}(() => {{\n{''.join(p + chr(10) for p in prelude)}{module.body.strip()}{tail}\n}})();")
        done.add(path)
    return "\n".join(out) + "\n"
