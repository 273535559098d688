"""One C++ function for the exchanges of a step that differ only in their names.

DaCe emits each nested SDFG as a function of its own, once per content: nested SDFGs of equal
``SDFG.hash_sdfg`` share one (``compiler.unique_functions="hash"``, DaCe's default). The hash
ignores the SDFG's name but not labels, data and symbol names or tasklet code, and the
expansions name all of an exchange after its uid (its arenas and their offset symbols, labels,
the members of the program's state struct it keeps). So a step exchanging two sets of fields
alike (count, dtype, layout, halo, transport) compiled the same code twice: its tables of
copies and runs, its flags, its posting and waiting.

``share_exchange_functions`` runs on CPU steps (on a GPU each exchange keeps a function of its
own until that path has run on a device), after every pass that finds an exchange's nodes by
their labels (fusion, timers), and renames, inside each exchange's nested SDFG (a function of
its own, ``lower_halo_exchanges(separate=True)``):

- the uid, in data names, connectors, symbols and labels, to ``gh``;
- the symbols of the arguments' descriptors (the fields' shapes and strides) to ``gh_s<n>``,
  numbered in the order of the arguments; the values arrive through the node's
  ``symbol_mapping``, as do the segment offsets and the exchange's first tag (``TAG_BASE``);
- the state members of its tasklets (named ``<uid>_<member>`` by every transport: requests,
  counters, GHEX objects) to members of a struct, one element per exchange
  using that function: ``__state->gh_<digest>[gh_instance].<member>``, ``gh_instance`` a
  symbol the call passes. A split pair's finish reads its start's element. The transports'
  exit code runs once per element.

What an exchange does is unchanged: each exchange keeps its own state, tags and offsets, and
its own function where anything else differs. The pass keeps an exchange as it is where its
state members do not follow the naming (none today).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import dace
from dace import dtypes

#: The exchange's first MPI tag (``CompiledExchange.tag_base``) in the C++ of its tasklets
#: (``exchange_constant``): the tags it posts are this plus constants.
TAG_BASE = "tag_base"
_CONSTANT = re.compile(r"^const int (\w+) = (-?\d+);  // of this exchange\n", re.MULTILINE)
_INSTANCE = "gh_instance"  # the element of the shared struct the call works on
_PLACEHOLDER = "GH_SHARED_STATE"
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def exchange_constant(name: str, value: int) -> str:
    """C++ declaring ``name``, an integer of one exchange that exchanges otherwise alike hold
    other values of (its first tag), at the head of a tasklet's code: the shared function
    gets it as an argument (a symbol of its nested SDFG)."""
    return f"const int {name} = {value};  // of this exchange\n"


def shared_name(name: str, uid: str) -> str:
    """``name`` (a label, data or symbol name of exchange ``uid``) in the lowered step."""
    return _own(uid).sub("gh", name)


def _own(uid: str) -> re.Pattern:
    """``uid`` where it begins a name or follows an underscore, and ends it or a part of it."""
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(uid)}(?=_|$)")


def share_exchange_functions(sdfg: dace.SDFG, exchanges: dict[str, str]) -> None:
    """Rename the nested SDFGs of the exchanges (``exchanges``: nested SDFG name -> uid) so
    that exchanges alike share one function."""
    nested: dict[str, list[tuple[Any, dace.SDFGState]]] = {}
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.NestedSDFG) and node.sdfg.name in exchanges:
            nested.setdefault(exchanges[node.sdfg.name], []).append((node, state))
    declared: dict[str, tuple[Any, tuple[str, ...], str]] = {}  # uid -> declaring node, ...
    for uid, nodes in nested.items():
        if not all(node.no_inline for node, _ in nodes) or not _follows_naming(uid, nodes):
            continue
        for node, state in nodes:
            members, exit_code = _rename(node, state, uid)
            if members:
                declared[uid] = (node, members, exit_code)
    groups: dict[str, list[str]] = {}  # struct name -> uids declaring it, in order
    for uid, (node, members, exit_code) in declared.items():
        key = repr((node.sdfg.hash_sdfg(), members, exit_code))
        groups.setdefault(f"gh_{hashlib.sha256(key.encode()).hexdigest()[:12]}", []).append(uid)
    for struct, uids in groups.items():
        for instance, uid in enumerate(uids):
            node, members, exit_code = declared[uid]
            _declare(node, struct, len(uids), members, exit_code)
            for other, _ in nested[uid]:
                _bind(other, struct, instance)


def _follows_naming(uid: str, nodes: list[tuple[Any, dace.SDFGState]]) -> bool:
    """Whether the state members of the exchange's tasklets are all ``<uid>_<member>``, one
    of its nodes declares them (a split pair's start) and only that node frees them."""
    declaring = 0
    for node, _ in nodes:
        tasklets = [tasklet for tasklet, _ in _tasklets(node.sdfg)]
        for tasklet in tasklets:
            if any(f" {uid}_" not in f" {field}" for field in tasklet.state_fields):
                return False
            if tasklet.code_exit.as_string.strip() and not tasklet.state_fields:
                return False
        declaring += any(tasklet.state_fields for tasklet in tasklets)
    uses = any(
        f"__state->{uid}_" in tasklet.code.as_string
        for node, _ in nodes
        for tasklet, _ in _tasklets(node.sdfg)
    )
    return declaring == 1 or (declaring == 0 and not uses)


def _tasklets(sdfg: dace.SDFG) -> list[tuple[Any, dace.SDFGState]]:
    return [(n, s) for n, s in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]


def _rename(node: Any, state: dace.SDFGState, uid: str) -> tuple[tuple[str, ...], str]:
    """Rename ``node``'s nested SDFG to names of their role (see the module); return the state
    members its tasklets declared (``type member...;``) and their exit code, both taken off
    them and written for the shared struct (``_PLACEHOLDER``, element ``gh_i``)."""
    inner = node.sdfg
    own = _own(uid)
    generic = lambda name: own.sub("gh", name)
    data = {name: generic(name) for name in inner.arrays if own.search(name)}
    symbols = {s: generic(s) for s in node.symbol_mapping if own.search(s)}
    fields = [f"_f{i}" for i in range(len(inner.arrays)) if f"_f{i}" in inner.arrays]
    for name in fields + sorted(inner.arrays, key=generic):
        desc = inner.arrays[name]
        for expr in [*desc.shape, *getattr(desc, "strides", ()), getattr(desc, "total_size", 0)]:
            for s in sorted(map(str, dace.symbolic.pystr_to_symbolic(expr).free_symbols)):
                if s in node.symbol_mapping and s not in symbols:
                    symbols[s] = f"gh_s{len(symbols)}"
    state_member = re.compile(rf"__state->{re.escape(uid)}_(\w+)")
    members, exits = [], []
    for tasklet, where in _tasklets(inner):
        connectors = {c: generic(c) for c in (*tasklet.in_connectors, *tasklet.out_connectors)}
        code, language = tasklet.code.as_string, tasklet.code.language
        if language == dtypes.Language.CPP:
            code = state_member.sub(rf"__state->{_PLACEHOLDER}[{_INSTANCE}].\1", code)
            for name, value in _CONSTANT.findall(code):
                if name not in inner.symbols:
                    inner.add_symbol(name, dtypes.int32)
                node.symbol_mapping[name] = int(value)
            code = _CONSTANT.sub("", code)
        names = {**data, **symbols, **{c: n for c, n in connectors.items() if c != n}}
        tasklet.code = dace.properties.CodeBlock(_substitute(code, names), language)
        _rename_connectors(tasklet, where, connectors)
        members += [re.sub(rf"\b{re.escape(uid)}_", "", f) for f in tasklet.state_fields]
        exit_code = tasklet.code_exit.as_string.strip()
        if exit_code:
            exits.append(state_member.sub(rf"__state->{_PLACEHOLDER}[gh_i].\1", exit_code))
        tasklet.state_fields = []
        tasklet.code_exit = dace.properties.CodeBlock("", dtypes.Language.CPP)
        tasklet.label = generic(tasklet.label)
    inner.replace_dict({**data, **symbols})
    for block in inner.all_control_flow_blocks():
        block.label = generic(block.label)
    for n, where in inner.all_nodes_recursive():
        if isinstance(n, dace.nodes.MapEntry):
            n.map.label = generic(n.map.label)
        if isinstance(n, (dace.nodes.EntryNode, dace.nodes.ExitNode)):
            _rename_connectors(
                n, where, {c: generic(c) for c in (*n.in_connectors, *n.out_connectors)}
            )
    for old, new in symbols.items():
        node.symbol_mapping[new] = node.symbol_mapping.pop(old)
    _rename_connectors(node, state, data)
    return tuple(members), "\n".join(exits)


def _substitute(code: str, names: dict[str, str]) -> str:
    """``code`` with each identifier of ``names`` replaced (whole identifiers only)."""
    return _IDENTIFIER.sub(lambda m: names.get(m.group(0), m.group(0)), code)


def _rename_connectors(node: Any, state: dace.SDFGState, names: dict[str, str]) -> None:
    """Rename ``node``'s connectors (types kept) and the ends of ``state``'s edges at them."""
    for connectors in (node.in_connectors, node.out_connectors):
        for old in [c for c in connectors if names.get(c, c) != c]:
            connectors[names[old]] = connectors.pop(old)
    for e in state.in_edges(node):
        e.dst_conn = names.get(e.dst_conn, e.dst_conn)
    for e in state.out_edges(node):
        e.src_conn = names.get(e.src_conn, e.src_conn)


def _declare(node: Any, struct: str, count: int, members: tuple[str, ...], exit_code: str) -> None:
    """Give the first C++ tasklet of ``node`` the shared struct's declaration and exit code."""
    tasklet = next(t for t, _ in _tasklets(node.sdfg) if t.code.language == dtypes.Language.CPP)
    body = " ".join(members)
    tasklet.state_fields = [f"struct {struct}_t {{ {body} }};", f"{struct}_t {struct}[{count}];"]
    if exit_code:
        code = exit_code.replace(_PLACEHOLDER, struct)
        tasklet.code_exit = dace.properties.CodeBlock(
            f"for (int gh_i = 0; gh_i < {count}; ++gh_i) {{\n{code}\n}}", dtypes.Language.CPP
        )


def _bind(node: Any, struct: str, instance: int) -> None:
    """Point ``node``'s code at element ``instance`` of ``struct``."""
    used = False
    for tasklet, _ in _tasklets(node.sdfg):
        code = tasklet.code.as_string
        if _PLACEHOLDER in code:
            used = True
            tasklet.code = dace.properties.CodeBlock(
                code.replace(_PLACEHOLDER, struct), dtypes.Language.CPP
            )
    if used:
        node.sdfg.add_symbol(_INSTANCE, dtypes.int32)
        node.symbol_mapping[_INSTANCE] = instance
