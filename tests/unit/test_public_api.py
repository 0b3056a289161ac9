import pickle

import avro_registry_sink
from avro_registry_sink import errors


def test_all_is_sorted_and_importable():
    assert avro_registry_sink.__all__ == sorted(avro_registry_sink.__all__)
    for name in avro_registry_sink.__all__:
        assert getattr(avro_registry_sink, name) is not None


def test_the_lazy_names_are_the_public_names():
    # the three lists of the package's top level (TYPE_CHECKING imports, __all__, the lazy table) must agree;
    # each name comes from the module the table gives
    import ast
    import importlib
    from pathlib import Path

    tree = ast.parse(Path(avro_registry_sink.__file__).read_text(encoding="utf-8"))
    checked = {alias.name: node.module for block in tree.body if isinstance(block, ast.If)
               for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert checked == avro_registry_sink._EXPORTS
    assert sorted(avro_registry_sink._EXPORTS) == avro_registry_sink.__all__
    for name, module in avro_registry_sink._EXPORTS.items():
        assert getattr(avro_registry_sink, name) is getattr(importlib.import_module(module), name)


def test_errors_pickle_with_their_context():
    err = errors.IncompatibleSchema("Subject 'x-value' refused", status_code=409, error_code=40901, subject="x-value", schema_id=3)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is errors.IncompatibleSchema
    assert str(back) == "Subject 'x-value' refused" and back.subject == "x-value" and back.error_code == 40901


def test_registry_error_mapping_uses_codes_then_status():
    assert errors.registry_error_for(404, 40401) is errors.SubjectNotFound
    assert errors.registry_error_for(409, 409) is errors.IncompatibleSchema
    assert errors.registry_error_for(409, None) is errors.IncompatibleSchema
    assert errors.registry_error_for(422, 42203) is errors.InvalidCompatibilityLevel
    assert errors.registry_error_for(500, 50001) is errors.RegistryUnavailable
    assert errors.registry_error_for(429, None) is errors.RegistryUnavailable
    assert errors.registry_error_for(418, None) is errors.RegistryError
    assert all(issubclass(c, errors.RegistryError) for c in errors.REGISTRY_ERROR_CODES.values())


def test_one_encoder_in_the_package():
    # issue 36: the package encodes with the columnar encoder only; the per-row reference it is checked against
    # lives in tests/support/reference_encoder.py and is no public name
    import ast
    from pathlib import Path

    root = Path(avro_registry_sink.__file__).parent
    encoders = sorted(f"{path.relative_to(root)}:{node.name}" for path in root.rglob("*.py")
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.ClassDef) and node.name.endswith("Encoder"))
    assert encoders == ["encoding/columnar.py:ColumnarEncoder"]
    assert "RowEncoder" not in avro_registry_sink.__all__ and not hasattr(avro_registry_sink, "RowEncoder")
