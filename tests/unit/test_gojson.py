from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    assert same(json.loads(gojson.dumps(value)), value)


def same(read: object, written: object) -> bool:
    """Equal, where a float Go wrote without a fraction (``1e16`` -> ``10000000000000000``) reads back as int."""
    if isinstance(written, float) and not isinstance(written, bool):
        return isinstance(read, (int, float)) and not isinstance(read, bool) and float(read) == written
    if isinstance(written, list):
        return isinstance(read, list) and len(read) == len(written) and all(map(same, read, written))
    if isinstance(written, dict):
        return isinstance(read, dict) and read.keys() == written.keys() and all(same(read[k], written[k]) for k in written)
    return type(read) is type(written) and read == written


def test_small_and_large_floats_keep_every_digit_in_fixed_notation():
    # Go writes 'f' format with the shortest digits between 1e-6 and 1e21; Python's repr switches to
    # exponents earlier (found by hypothesis: 6.103515625e-05 once came out as 6.1e-05)
    assert gojson.dumps(6.103515625e-05) == "0.00006103515625"
    assert gojson.dumps(1.5e-05) == "0.000015"
    assert gojson.dumps(1.2345678901234567e20) == "123456789012345670000"
    assert gojson.dumps(1e-07) == "1e-07"
