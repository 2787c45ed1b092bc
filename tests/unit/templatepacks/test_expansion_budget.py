"""How far templates may grow when they resolve: pyhocon's copies are sized before they are made
(`hocon._Budget`), so a template is refused naming the key and the limit whatever HOCON feature
grows it, while the templates people write resolve as before."""

from __future__ import annotations

import pytest

from portal.templatepacks import hocon, safety


def resolve(*texts: str, flow: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    layers = [hocon.parse_template(text, f"t{index}.template") for index, text in enumerate(texts)]
    return hocon.resolve_layers([*layers, hocon.tree_from_flat(flow or {})])


def refusal(*texts: str, flow: dict[str, str] | None = None) -> str:
    with pytest.raises(hocon.ExpansionLimit) as refused:
        resolve(*texts, flow=flow)
    return str(refused.value)


def test_an_object_extended_a_few_times_resolves_as_before():
    text = "job { a = 1 }\njob = ${job} { b = 2 }\njob = ${job} { c = ${job.a} }\njob += { d = 4 }\n"
    assert resolve(text)[0] == {"job.a": "1", "job.b": "2", "job.c": "1", "job.d": "4"}


def test_a_string_that_doubles_itself_is_refused_naming_its_dotted_key():
    text = 'lake.path = "xxxxx"\n' + "lake.path = ${lake.path}${lake.path}\n" * 20
    assert refusal(text) == "'lake.path' would expand to more than 65536 characters (the limit)."


def test_an_object_extended_again_and_again_is_refused_before_pyhocon_rebuilds_it_2_to_the_n_times():
    text = "job { a = 1 }\n" + "job = ${job} { b = 2 }\n" * 16
    assert refusal(text) == "'job' would make the templates copy or merge more than 5000 values (the limit)."


def test_a_value_copied_into_a_list_is_named_by_its_substitution():
    text = "list = [${seed}]\n" + "list = ${list} ${list}\n" * 6
    assert resolve(text, flow={"seed": "x" * 100})[0]["list"] == ",".join(["x" * 100] * 64)
    said = refusal(text, flow={"seed": "x" * 60_000})
    assert said.startswith("the templates would expand to more than 1048576 characters (the limit)")
    assert said.endswith("at '${seed}'.")


def test_an_object_that_holds_itself_is_refused_naming_the_nesting_limit():
    said = refusal("a { x = 1 }\na = ${a} { y = ${a} }\n")
    assert said == "'y' would nest objects or lists deeper than 64 levels (the limit)."


def test_a_refusal_leaves_the_next_resolution_its_whole_budget():
    refusal('a = "xxxxx"\n' + "a = ${a}${a}\n" * 20)
    text = 'a = "' + "x" * 60_000 + '"\nb = ${a}\n'
    assert len(resolve(text)[0]["b"]) == 60_000


def test_every_missing_attribute_is_listed_in_the_order_the_template_names_them():
    properties, missing = resolve("a = ${first}\nb = ${second}-${third}\nc = ${?optional}\n")
    assert missing == ["first", "second", "third"]
    assert properties == {"a": "", "b": "-"}


def test_a_template_that_doubles_what_its_parent_gives_is_refused_with_its_parents_only():
    parent = hocon.parse_template('a = "xxxxx"\n', "parent.template")
    levels = [parent]
    for _level in range(14):
        levels.append(hocon.parse_template("a = ${a}${a}\n", "child.template"))
    child = levels[-1]
    assert safety.tree_problems(child) == []
    nearest_first = list(reversed(levels[:-1]))
    assert safety.tree_problems(child, parents=nearest_first) == [
        "'a' would expand to more than 65536 characters (the limit)."
    ]


def test_a_template_that_resolves_only_with_a_flows_values_is_left_to_the_flows_save():
    text = "a = ${missing.object} { b = 1 }\n"  # an empty placeholder cannot be merged with an object
    with pytest.raises(hocon.HoconError):
        resolve(text)
    assert safety.expansion_problems([hocon.parse_template(text, "t.template")]) == []


def test_an_object_written_one_statement_per_key_is_read_up_to_the_limit():
    """pyhocon copies the object at each statement that adds to it: 140 keys cost 9,730 copies."""
    one_by_one = "".join(f"source.k{i} = v\n" for i in range(140))
    assert len(hocon.parse_template(one_by_one, "ok.template")["source"]) == 140
    with pytest.raises(hocon.HoconError) as refused:
        hocon.parse_template(one_by_one + "source.k140 = v\nsource.k141 = v\n", "many.template")
    assert str(refused.value) == (
        "many.template: 'source': statements adding to this object one by one copy more than 10000 "
        "keys (the limit); write its keys inside one source { … }."
    )
    in_one_block = "source {\n" + "".join(f"  k{i} = v\n" for i in range(1000)) + "}\n"
    assert len(hocon.parse_template(in_one_block, "block.template")["source"]) == 1000
