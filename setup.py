"""The package's compiled part, built by setuptools with the rest of the package (``pip install``, ``pip wheel``,
``pip install -e``; the metadata is in ``pyproject.toml``).

``formats/native/debezium_scan.c``, the debezium-json payload scanner, becomes the shared library
``avro_registry_sink/formats/_debezium_scan*.so``, which ``formats/native_scan.py`` loads with :mod:`ctypes` (it
is a plain C library, not a Python extension module: no ``PyInit`` and no Python headers). The digest of the
source is compiled in, so that the loader can tell a library built from another version of the source (a
source checkout edited since it was built) and not use it.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "avro_registry_sink/formats/native/debezium_scan.c"
DIGEST = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()[:16]

setup(ext_modules=[Extension(
    "avro_registry_sink.formats._debezium_scan",
    sources=[SOURCE],
    define_macros=[("DEBEZIUM_SCAN_DIGEST", f'"{DIGEST}"')],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-pthread"],
    extra_link_args=["-pthread"],
    optional=True,
)])
