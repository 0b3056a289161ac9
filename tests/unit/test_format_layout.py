"""TiCDC CSV layout detection (formats.csv.resolve_layout) and the job's bad-row budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from avro_registry_sink.formats.csv import CsvOptions, CsvSettingsError, resolve_layout
from avro_registry_sink.tabledef.ddl import parse_ddl

T = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY, b VARBINARY(8) NULL, v VARCHAR(8))")[0]
EXPLICIT_ALL = frozenset({"include-commit-ts", "output-old-value", "output-handle-key", "binary-encoding-method"})


@pytest.mark.parametrize(("text", "detected"), [
    ('"I","t","s",1,"AQI=","a"\r\n', None),
    ('"I","t","s",449,1,"AQI=","a"\r\n', {"include_commit_ts": True}),
    ('"I","t","s",false,1,"AQI=","a"\r\n', {"output_old_value": True}),
    ('"D","t","s",449,true,1,"AQI=","a"\r\n"I","t","s",449,true,2,\\N,"b"\r\n',
     {"include_commit_ts": True, "output_old_value": True}),
    ('"I","t","s",449,1,"010203","a"\r\n"I","t","s",450,2,"0aff","a"\r\n',
     {"include_commit_ts": True, "binary_encoding_method": "hex"}),
    ("ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,ticdc-meta$commit-ts,id,b,v\r\n"
     '"I","t","s",449,1,\\N,"a"\r\n', {"include_commit_ts": True}),
])
def test_the_layout_is_detected_from_the_data(text, detected):
    options, note = resolve_layout(text, T)
    if detected is None:
        assert options == CsvOptions() and note is None
    else:
        got = {k: getattr(options, k) for k in detected}
        assert {k: getattr(v, "value", v) for k, v in got.items()} == detected
        assert note and note.startswith("detected ")


def test_explicit_settings_that_the_rows_contradict_name_the_setting():
    with pytest.raises(CsvSettingsError) as info:
        resolve_layout('"I","t","s",449,1,"AQI=","a"\r\n', T, CsvOptions(), explicit=EXPLICIT_ALL, source="f.csv")
    assert info.value.context["reason"] == "misconfiguration"
    assert "include-commit-ts=false" in info.value.message and "--csv include-commit-ts=true" in info.value.message
    # explicit settings that match are kept as they are
    options = CsvOptions(**{"include-commit-ts": True})
    assert resolve_layout('"I","t","s",449,1,"AQI=","a"\r\n', T, options, explicit=EXPLICIT_ALL) == (options, None)


def test_a_few_bad_rows_are_bad_data_not_settings():
    text = '"I","t","s",449,1,"AQI=","a"\r\n"I","t","s",449,2\r\n"I","t","s",450,3,\\N,"c"\r\n'
    options = CsvOptions(**{"include-commit-ts": True})
    assert resolve_layout(text, T, options, explicit=EXPLICIT_ALL) == (options, None)


def test_the_bad_row_budget_fails_the_batch(tmp_path: Path):
    from avro_registry_sink.spark.driver.job import BadInputBudgetExceeded, _check_budget
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    errors = [{"message": f"f.csv:{i}: bad"} for i in range(3)]
    base = JobOptions(source=parse_source(str(tmp_path)), checkpoint=tmp_path / "ck")
    _check_budget(base, errors, 10)  # no budget: never fails
    _check_budget(JobOptions(**{**base.__dict__, "max_bad_rows": 3}), errors, 10)
    with pytest.raises(BadInputBudgetExceeded, match=r"3 of 13 rows .* budget of 2 rows"):
        _check_budget(JobOptions(**{**base.__dict__, "max_bad_rows": 2}), errors, 10)
    with pytest.raises(BadInputBudgetExceeded, match=r"budget of 10.00% of the batch"):
        _check_budget(JobOptions(**{**base.__dict__, "max_bad_ratio": 0.1}), errors, 10)
