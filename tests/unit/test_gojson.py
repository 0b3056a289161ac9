from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from avro_registry_sink.schema import gojson


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3.140000104904175, "3.140000104904175"),
        (1.0, "1"),
        (1e16, "10000000000000000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-7, "1e-07"),
        (0.000001, "0.000001"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (123456789.125, "123456789.125"),
    ],
)
def test_floats_like_go(value, text):
    assert gojson.dumps(value) == text


def test_strings_like_go():
    assert gojson.dumps("<a&b>\u2028\n\x01é") == '"\\u003ca\\u0026b\\u003e\\u2028\\n\\u0001é"'


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=20))
def test_output_is_json_that_reads_back(value):
    assert json.loads(gojson.dumps(value)) == value
