"""YAML is loaded with its alias expansion, nesting and self-reference bounded."""

import time

import pytest

from atoll.bounded_yaml import load_bounded_yaml
from atoll.errors import AtollError
from atoll.experiment_file import parse_experiment


def billion_laughs(levels: int = 9, width: int = 9, indent: str = "") -> str:
    """The classic alias bomb: each anchor is a list of ``width`` aliases of the previous one."""
    lines = [f'{indent}a0: &a0 ["lol"]']
    for level in range(1, levels):
        aliases = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"{indent}a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_quickly_naming_the_source_and_the_limit():
    bomb = billion_laughs()
    assert len(bomb) < 700
    started = time.perf_counter()
    with pytest.raises(AtollError) as refused:
        load_bounded_yaml(bomb, source="request body")
    assert time.perf_counter() - started < 1.0
    assert refused.value.code == "bad_yaml"
    assert refused.value.message.startswith("request body: the YAML has more than 100000 nodes")


def test_the_bound_counts_expanded_nodes_not_anchors():
    # a0 is 2 nodes, a1 (9 x a0) 19, a2 (9 x a1) 172, the whole document 197: 4 anchors written,
    # 197 nodes once expanded.
    small_bomb = billion_laughs(levels=3)
    assert load_bounded_yaml(small_bomb, source="s", max_nodes=197)["a2"][8] == [["lol"]] * 9
    with pytest.raises(AtollError, match="has more than 196 nodes"):
        load_bounded_yaml(small_bomb, source="s", max_nodes=196)
    with pytest.raises(AtollError, match="has more than 150 nodes"):
        load_bounded_yaml(small_bomb, source="s", max_nodes=150)


def test_ordinary_anchors_and_merge_keys_still_load():
    text = (
        "base: &base {agent: replay, model: replay}\n"
        "agents:\n"
        "  - {<<: *base, name: a}\n"
        "  - {<<: *base, name: b}\n"
        "again: *base\n"
    )
    data = load_bounded_yaml(text, source="s")
    assert data["agents"] == [
        {"agent": "replay", "model": "replay", "name": "a"},
        {"agent": "replay", "model": "replay", "name": "b"},
    ]
    assert data["again"] == {"agent": "replay", "model": "replay"}


def test_a_document_that_contains_itself_is_refused():
    with pytest.raises(AtollError, match="refers to itself"):
        load_bounded_yaml("a: &a [1, *a]\n", source="s")
    with pytest.raises(AtollError, match="refers to itself"):
        load_bounded_yaml("a: &a {b: *a}\n", source="s")


def test_deep_nesting_is_refused():
    assert load_bounded_yaml("[" * 60 + "]" * 60, source="s") is not None
    with pytest.raises(AtollError, match="nests deeper than 64 levels"):
        load_bounded_yaml("[" * 100 + "]" * 100, source="s")


def test_unsafe_tags_and_bad_yaml_are_one_clear_error():
    with pytest.raises(AtollError, match="request body: not valid YAML"):
        load_bounded_yaml("!!python/object/apply:os.system ['true']", source="request body")
    with pytest.raises(AtollError, match="s: not valid YAML"):
        load_bounded_yaml("[1, 2", source="s")


def test_an_experiment_with_a_bomb_is_a_bad_experiment():
    with pytest.raises(AtollError) as refused:
        parse_experiment("name: x\nbenchmark: b\nagents: []\n" + billion_laughs(), source="exp.yaml")
    assert refused.value.code == "bad_experiment"
    assert refused.value.message.startswith("exp.yaml: the YAML has more than")
