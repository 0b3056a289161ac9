"""Every schema change on record: the registration journal, field-level diffs and downstream ``ALTER TABLE``s.

* :mod:`.diff`: the field-level difference of two flat-Avro record schemas (added, removed, renamed, type,
  nullability, default, ``connect.parameters``), renames taken from the DDL that made the change.
* :mod:`.alter`: the ``ALTER TABLE`` statements that bring a downstream table (PostgreSQL, MySQL/MariaDB) created
  from the older schema, as Kafka Connect's JDBC sinks create it, to the newer one.
* :mod:`.journal`: the history of registrations kept under a job's checkpoint (JSON lines, one file per batch).
* :mod:`.render`: terminal tables and JSON of both.
"""
