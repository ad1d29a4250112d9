"""Which Vega-Lite specs `validate_spec` accepts, and how it refuses hostile ones."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.charts.spec import validate_spec
from mcp_analysis.errors import ChartError

LIMITS = ChartSettings()
QUARTERS = [{"quarter": f"Q{i} 2025", "revenue": r} for i, r in enumerate([12.4, 13.1, 14.6, 15.3], 1)]


def bar(**extra: Any) -> dict[str, Any]:
    return {
        "data": {"values": QUARTERS},
        "mark": "bar",
        "encoding": {
            "x": {"field": "quarter", "type": "nominal"},
            "y": {"field": "revenue", "type": "quantitative"},
        },
    } | extra


# Specs the way models write them: schema URL, titles, transforms, composition, tooltips.
MODEL_WRITTEN = {
    "bar with schema and title": bar(
        **{"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": "Revenue per quarter"}
    ),
    "line with colour and tooltip": {
        "data": {"values": [{"q": q, "segment": s, "v": i} for i, (q, s) in enumerate([("Q1", "a"), ("Q2", "b")])]},
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {"field": "q", "type": "ordinal"},
            "y": {"field": "v", "type": "quantitative"},
            "color": {"field": "segment", "type": "nominal"},
            "tooltip": [{"field": "v"}, {"field": "segment"}],
        },
    },
    "layer of bars and text labels": {
        "data": {"values": QUARTERS},
        "encoding": {"x": {"field": "quarter", "type": "nominal"}, "y": {"field": "revenue", "type": "quantitative"}},
        "layer": [{"mark": "bar"}, {"mark": {"type": "text", "dy": -5}, "encoding": {"text": {"field": "revenue"}}}],
    },
    "aggregate, filter and calculate": bar(
        transform=[
            {"filter": "datum.revenue > 13"},
            {"calculate": "datum.revenue * 1e6", "as": "usd"},
            {"aggregate": [{"op": "sum", "field": "usd", "as": "total"}], "groupby": ["quarter"]},
        ]
    ),
    "pie": {
        "data": {"values": QUARTERS},
        "mark": "arc",
        "encoding": {"theta": {"field": "revenue", "type": "quantitative"}, "color": {"field": "quarter"}},
    },
    "hconcat": {"hconcat": [bar(), bar(mark="line")]},
    "repeat": {
        "data": {"values": QUARTERS},
        "repeat": ["revenue"],
        "spec": {"mark": "bar", "encoding": {"x": {"field": {"repeat": "repeat"}, "type": "quantitative"}}},
    },
    "named dataset": {
        "datasets": {"quarters": QUARTERS},
        "data": {"name": "quarters"},
        "mark": "point",
        "encoding": {"x": {"field": "revenue", "type": "quantitative"}},
    },
}


@pytest.mark.parametrize("name", list(MODEL_WRITTEN))
def test_specs_as_models_write_them_are_accepted(name: str) -> None:
    checked = validate_spec(MODEL_WRITTEN[name], LIMITS)
    assert checked.rows >= 2
    assert checked.views >= 1
    assert checked.spec == MODEL_WRITTEN[name]  # nothing dropped or rewritten


def test_the_checked_spec_is_a_json_copy_that_later_changes_cannot_reach() -> None:
    rows = [{"quarter": "Q1", "revenue": (1, 2)}]
    spec = bar(data={"values": rows}, title="Revenue")
    checked = validate_spec(spec, LIMITS)
    rows.append({"url": "https://example.com/steal"})
    assert checked.spec["data"]["values"] == [{"quarter": "Q1", "revenue": [1, 2]}]
    assert checked.title == "Revenue" and checked.rows == 1
    assert '"revenue":[1,2]' in checked.text


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"data": {"url": "https://example.com/data.csv"}, "mark": "bar"}, "spec.data.url"),
        ({"data": {"url": "file:///etc/passwd"}, "mark": "bar"}, "spec.data.url"),
        (
            bar(transform=[{"lookup": "quarter", "from": {"data": {"url": "http://10.0.0.1/x.json"}, "key": "q"}}]),
            "spec.transform[0].from.data.url",
        ),
        (bar(layer=[{"data": {"url": "data.csv"}, "mark": "bar"}]), "spec.layer[0].data.url"),
        ({"data": {"values": [{"u": "x"}]}, "mark": {"type": "point", "href": "https://evil.example"}}, "href"),
        (bar(encoding={"x": {"field": "quarter"}, "href": {"field": "quarter"}}), "spec.encoding.href"),
        ({"data": {"sequence": {"start": 0, "stop": 1e9}}, "mark": "point"}, "spec.data.sequence"),
    ],
)
def test_anything_that_could_fetch_or_link_is_refused_by_path(spec: dict[str, Any], where: str) -> None:
    with pytest.raises(ChartError, match="is not allowed") as refused:
        validate_spec(spec, LIMITS)
    assert where in str(refused.value)


def test_an_image_mark_is_refused_with_the_marks_that_are_allowed() -> None:
    spec = {"data": {"values": [{"img": "x.png"}]}, "mark": "image", "encoding": {"x": {"field": "img"}}}
    with pytest.raises(ChartError, match=r"mark 'image' at spec.mark is not allowed; use one of: arc, area, bar"):
        validate_spec(spec, LIMITS)


class Untouchable(list):  # type: ignore[type-arg]
    """Claims ten million rows and fails the test if anything walks them."""

    def __len__(self) -> int:
        return 10_000_000

    def __iter__(self) -> Any:
        raise AssertionError("the rows were walked")

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("the rows were read")


def test_ten_million_points_are_refused_by_their_count_without_being_walked() -> None:
    with pytest.raises(ChartError, match=r"holds 10,000,000 rows; a chart takes at most 5,000 \(charts.max_rows\)"):
        validate_spec(bar(data={"values": Untouchable()}), LIMITS)


def test_a_fifty_megabyte_title_is_refused_by_its_length() -> None:
    with pytest.raises(ChartError, match=r"spec.title is 50,000,000 characters; at most 1,000"):
        validate_spec(bar(title="x" * 50_000_000), LIMITS)


def test_deeply_nested_layers_are_refused_without_recursing() -> None:
    spec: dict[str, Any] = {"mark": "point"}
    for _ in range(100_000):  # far past Python's recursion limit
        spec = {"layer": [spec]}
    with pytest.raises(ChartError, match=r"nested deeper than 24 levels at spec.layer\[0\]"):
        validate_spec(spec, LIMITS)


@pytest.mark.parametrize(
    "spec",
    [
        {"layer": [bar() for _ in range(17)]},
        {"vconcat": [{"hconcat": [bar() for _ in range(5)]} for _ in range(4)]},
        {"data": {"values": QUARTERS}, "repeat": {"row": list("abcde"), "column": list("abcde")}, "spec": bar()},
    ],
)
def test_more_views_than_allowed_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(ChartError, match=r"views .*at most 16 \(charts.max_views\)"):
        validate_spec(spec, LIMITS)


def test_a_spec_with_more_values_than_allowed_is_refused_before_its_rows_are_walked() -> None:
    wide = [{f"f{i}": i for i in range(60)} for _ in range(4000)]  # 4,000 rows, 240,000 values
    with pytest.raises(ChartError, match=r"more than 200,000 values \(charts.max_values\)"):
        validate_spec(bar(data={"values": wide}), LIMITS)


def test_a_spec_larger_than_max_spec_kb_is_refused_by_its_bytes() -> None:
    # The hostile round's spec: 5,000 rows sharing one dict of 36 fields of 1,000 characters, 180 MB
    # as JSON. Its values pass charts.max_values; its bytes are counted as the walk goes, so it is
    # refused after ~2 MB of them (the default), before json.dumps makes the first copy.
    row = {f"k{j}": "x" * 999 + str(j % 10) for j in range(36)}
    with pytest.raises(ChartError, match=r"more than 2,048 KB as JSON, data included \(charts.max_spec_kb\)"):
        validate_spec(bar(data={"values": [row] * 5000}), LIMITS)
    small, kilobyte = ChartSettings(max_spec_kb=16), {"a": "x" * 1000}  # 1,009 bytes as a row
    with pytest.raises(ChartError, match=r"more than 16 KB as JSON"):  # the bound is the setting's
        validate_spec(bar(data={"values": [kilobyte] * 17}), small)
    assert validate_spec(bar(data={"values": [kilobyte] * 15}), small).rows == 15


SIZED = {
    "escapes, accents and emoji": {"t": 'é"\\\n\x01 😀\u2028', "k\u00e9y": ["\x7f", ""]},
    "numbers and constants": {"n": [0, -1, 2**62, 1e22, -2.5e-300, 5e-324, 0.1 + 0.2, True, False, None]},
    "empty and nested": {"a": {}, "b": [], "c": [[{}], {"d": [[]]}]},
}


@pytest.mark.parametrize("name", [*SIZED, *MODEL_WRITTEN])
def test_the_size_counted_is_the_json_the_renderer_gets(name: str) -> None:
    extra = SIZED.get(name)
    spec = bar(usermeta=extra) if extra is not None else MODEL_WRITTEN[name]
    checked = validate_spec(spec, LIMITS)
    assert (
        checked.size
        == len(checked.text.encode())
        == len(json.dumps(spec, ensure_ascii=False, separators=(",", ":")).encode())
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"bytes", "bytes at spec.data.values"),
        ({1, 2}, "set at spec.data.values"),
        (math.nan, "nan at spec.data.values"),
        (2**80, "too large"),
    ],
)
def test_values_that_are_not_json_are_refused(value: Any, message: str) -> None:
    with pytest.raises(ChartError, match=message):
        validate_spec(bar(data={"values": [{"quarter": "Q1", "revenue": value}]}), LIMITS)


def test_text_data_values_are_refused_with_the_shape_to_use() -> None:
    with pytest.raises(ChartError, match=r"spec.data.values is text; give the rows as a list of dicts"):
        validate_spec(bar(data={"values": "quarter,revenue\nQ1,12.4", "format": {"type": "csv"}}), LIMITS)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bar", r"spec must be a dict \(a Vega-Lite specification\), not str"),
        ({"data": {"values": QUARTERS}}, r"spec draws nothing: give it a mark"),
        (bar(encoding={"x": {"field": "quarter"}, "url2": {}}), r"encoding channel 'url2' at spec.encoding"),
        ({"layer": []}, r"spec.layer must be a non-empty list of views"),
    ],
)
def test_malformed_specs_say_what_to_change(spec: Any, message: str) -> None:
    with pytest.raises(ChartError, match=message):
        validate_spec(spec, LIMITS)


def test_limits_come_from_the_settings() -> None:
    small = ChartSettings(max_rows=3)
    with pytest.raises(ChartError, match=r"holds 4 rows; a chart takes at most 3"):
        validate_spec(bar(), small)
    assert validate_spec(bar(), ChartSettings(max_rows=4)).rows == 4
