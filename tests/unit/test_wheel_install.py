"""The wheel built from the repository's files carries the compiled scanner: installed in a fresh venv on a
machine without a C compiler, debezium-json payloads are read by the built library (``native_scan.engine()``).

The wheel is built as a clean clone would build it (the files git tracks, copied out; ``pip wheel`` with this
venv's setuptools, no build isolation: no network), installed without its dependencies into a fresh venv that
sees this venv's third-party packages (and not this checkout's editable install) through a ``.pth`` file, and
run with ``PATH`` holding no compiler and ``CC`` unset.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent("""
    import json, shutil
    import pyarrow as pa
    import avro_registry_sink
    from avro_registry_sink.formats import native_scan
    from avro_registry_sink.formats.changelog_arrow import TableVersions, debezium_rows
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

    table = TableDef(schema_name="d", table="t", primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False), ColumnDef(name="name", type=MySQLType.VARCHAR)))
    texts = ['{"before":null,"after":{"id":%d,"name":"n\\\\u00e9%d"},"op":"c","ts_ms":1,'
             '"source":{"db":"d","table":"t","commit_ts":%d,"name":"x","pos":0}}' % (i, i, 1000 + i) for i in range(5)]
    messages = pa.array(texts, pa.string())
    scanned = native_scan.scan_debezium(messages, [("id", "int64"), ("name", "string")])
    found = debezium_rows(messages, TableVersions(history={("d", "t"): [(table.version, table)]},
                                                  planned=frozenset({("d", "t", table.version)})))
    print(json.dumps({
        "engine": native_scan.engine(), "package": avro_registry_sink.__file__, "cc": shutil.which("cc"),
        "declined": None if scanned is None else scanned[1].tolist(),
        "ids": [x for rows in found.tables for x in rows.columns.column("id").to_pylist()],
        "names": [x for rows in found.tables for x in rows.columns.column("name").to_pylist()],
        "slow": found.slow.tolist()}))
""")


def _tracked_copy(dest: Path) -> None:
    """The files a clean clone has (tracked, as they are in the work tree)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if not name or not (ROOT / name).is_file():
            continue  # a file deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def _dependencies_only(dest: Path) -> Path:
    """A directory of links to this venv's installed packages, less this package (and its editable finder)."""
    site = Path(sysconfig.get_paths()["purelib"])
    dest.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("avro_registry_sink", "__editable__", "_virtualenv")) or name.endswith(".pth"):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


def test_the_wheel_runs_the_built_scanner_without_a_compiler(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the wheel is built from the files git tracks: run from a git checkout with git installed")
    clone = tmp_path / "clone"
    _tracked_copy(clone)
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(clone)], capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel, = dist.glob("avro_registry_sink-*.whl")
    assert "-py3-none-any" not in wheel.name  # a platform wheel: it holds compiled code
    libraries = [n for n in zipfile.ZipFile(wheel).namelist()
                 if n.startswith("avro_registry_sink/formats/_debezium_scan") and n.endswith(".so")]
    assert len(libraries) == 1, zipfile.ZipFile(wheel).namelist()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    fresh_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     capture_output=True, text=True, check=True).stdout.strip())
    (fresh_site / "dependencies.pth").write_text(f"{_dependencies_only(tmp_path / 'deps')}\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300,
                               check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]

    no_compiler = tmp_path / "bin"  # PATH: an empty directory (python is run by its full path)
    no_compiler.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "PYTHONPATH", "PYTHONHOME", "AVRO_SINK_NATIVE")}
    env.update(PATH=str(no_compiler), AVRO_SINK_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    ran = subprocess.run([str(python), "-c", _PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(fresh_site)), got  # the wheel's package, not this checkout's
    assert got["cc"] is None
    assert got["engine"] == "built", (got, ran.stderr[-2000:])
    assert got["declined"] == [False] * 5
    assert got["ids"] == [0, 1, 2, 3, 4] and got["names"] == [f"né{i}" for i in range(5)] and got["slow"] == []
    assert not (tmp_path / "cache" / "lib").exists()  # nothing compiled at run time
