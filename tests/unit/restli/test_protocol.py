"""Rest.li 2.0 object notation as Gobblin's clients write it in URLs."""

from __future__ import annotations

import pytest

from portal.restli import protocol


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("(flowGroup:g,flowName:n)", {"flowGroup": "g", "flowName": "n"}),
        ("($params:(),flowGroup:g,flowName:n)", {"$params": {}, "flowGroup": "g", "flowName": "n"}),
        ("(%24params:(),flowGroup:g,flowName:n)", {"$params": {}, "flowGroup": "g", "flowName": "n"}),
        ("%28flowGroup%3Ag%2CflowName%3An%29", {"flowGroup": "g", "flowName": "n"}),  # the whole key encoded
        ("(path:%2Fdata%3A1%2C2,empty:'')", {"path": "/data:1,2", "empty": ""}),  # escaped structure chars
        ("List(a,b,(x:1))", ["a", "b", {"x": "1"}]),
        ("List()", []),
        ("plain%20text", "plain text"),
    ],
)
def test_a_value_reads_as_restli_wrote_it(text, value):
    assert protocol.parse(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("(flowGroup:g", "expected ')'"),
        ("(flowGroup:g,flowGroup:h)", "given twice"),
        ("(:g)", "expected a field name"),
        ("(a:b))", "unexpected text"),
        ("(a:" * 40 + "x" + ")" * 40, "nested too deeply"),
    ],
)
def test_broken_notation_says_where(text, reason):
    with pytest.raises(protocol.RestLiSyntaxError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        protocol.parse(text)


def test_keys_are_written_with_params_first_and_escaped():
    key = {"flowName": "n", "flowGroup": "g", "$params": {"flowExecutionId": -1, "flowName": "n"}}
    assert protocol.encode(key) == "($params:(flowExecutionId:-1,flowName:n),flowGroup:g,flowName:n)"
    assert protocol.encode({"a": "x:y,(z)", "b": ""}) == "(a:x%3Ay%2C%28z%29,b:'')"
    assert protocol.parse(protocol.encode({"a": "x:y,(z)", "b": ["1", "2"]})) == {
        "a": "x:y,(z)",
        "b": ["1", "2"],
    }


def test_finder_parameters_keep_escaped_characters_as_data():
    query = "q=filterFlows&templateUri=FS%3A%2F%2F%2Fa.template&flowId=(flowGroup:g,flowName:n)&count=2"
    assert protocol.parse_query(query) == {
        "q": "filterFlows",
        "templateUri": "FS:///a.template",
        "flowId": {"flowGroup": "g", "flowName": "n"},
        "count": "2",
    }


def test_a_key_for_the_id_header_is_written_without_url_escaping():
    """encodeKeyForHeader: only the notation's own characters (and %) are escaped."""
    key = {"flowName": "n/1 é", "flowGroup": "g:(x)"}
    assert protocol.encode_for_header(key) == "(flowGroup:g%3A%28x%29,flowName:n/1 é)"
    assert protocol.encode_for_header({"a": "", "b": "50%"}) == "(a:'',b:50%25)"
    assert protocol.parse(protocol.encode_for_header(key)) == key
