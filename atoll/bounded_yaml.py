"""YAML that cannot blow up: safe tags only, alias expansion and nesting bounded.

PyYAML's safe loader shares an aliased node instead of copying it, so a "billion laughs"
document of a few hundred bytes (nine anchors, each a list of nine aliases of the previous
one) loads in no time into a structure whose *expanded* size is 9**9 nodes; everything that
walks it afterwards (validation, JSON dumps, fingerprints) expands it, for minutes and
gigabytes. :func:`load_bounded_yaml` composes the node graph first (libyaml when available),
counts the nodes it would expand to (each shared node's size computed once, so the count
itself is linear in the document), and refuses a document that expands to more than
``max_nodes`` nodes, nests deeper than ``max_depth`` or refers to itself, before anything
is constructed. libyaml's scanner holds the interpreter while it runs: a server parses in a
child process (:class:`orchestrator.submission.ExperimentParser` uses
:func:`load_bounded_yaml_outcome`).
"""

from __future__ import annotations

from typing import Any

import yaml

from atoll.errors import AtollError, ErrorCode

#: Expanded nodes (every scalar, list and mapping, counting each alias as a copy of what it
#: names) of the largest document accepted: an experiment has hundreds, not a hundred thousand.
MAX_NODES = 100_000
#: Deepest nesting accepted (libyaml itself stops at 1000; JSON dumps recurse on it).
MAX_DEPTH = 64

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_bounded_yaml(
    text: str,
    *,
    source: str,
    code: ErrorCode = ErrorCode.bad_yaml,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The data of one YAML (or JSON) document, loaded with safe tags only.

    Raises AtollError(``code``) naming ``source`` when the text is not valid YAML, when its
    aliases expand it past ``max_nodes`` nodes, when it nests deeper than ``max_depth``, or
    when an alias refers to a node that contains it. CPU-bound: call it off the event loop.
    """
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise AtollError(code, f"{source}: not valid YAML: {exc}") from None
        if node is None:
            return None
        _check_expansion(node, source, code, max_nodes, max_depth)
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise AtollError(code, f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node, source: str, code: ErrorCode, max_nodes: int, max_depth: int) -> None:
    """Refuse a node graph whose expansion is too big, too deep, or infinite (a cycle).

    A post-order walk without recursion: ``sizes`` holds the expanded size of every node seen
    (a shared node is sized once), ``depths`` the deepest expanded nesting below it.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            depths[key] = 1 + max((depths[id(child)] for child in children), default=0)
            on_path.discard(key)
            if sizes[key] > max_nodes:
                raise AtollError(
                    code,
                    f"{source}: the YAML has more than {max_nodes} nodes, counting each alias "
                    "(*name) as a copy of what it names; send a smaller document or fewer aliases",
                )
            if depths[key] > max_depth:
                raise AtollError(code, f"{source}: the YAML nests deeper than {max_depth} levels")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise AtollError(code, f"{source}: the YAML refers to itself through an alias (a cycle)")
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            child_key = id(child)
            if child_key in on_path:
                raise AtollError(code, f"{source}: the YAML refers to itself through an alias (a cycle)")
            if child_key not in sizes:
                stack.append((child, False))


def load_bounded_yaml_outcome(text: str, source: str, code: ErrorCode) -> tuple[str, Any]:
    """:func:`load_bounded_yaml` for a child process: ``("ok", data)`` or ``("error", (code,
    message))`` (AtollError does not pickle), so a caller can keep parsing off its interpreter."""
    try:
        return "ok", load_bounded_yaml(text, source=source, code=code)
    except AtollError as exc:
        return "error", (exc.code, exc.message)
