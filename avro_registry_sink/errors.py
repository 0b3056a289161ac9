"""Exceptions raised by avro-registry-sink.

Every message is a full sentence that names the table, column, subject or schema id involved and, where
there is a closed set of valid values, lists them. Context is kept as attributes too, and every error
pickles (Spark ships executor errors to the driver), so nothing is lost on the way.

The tree::

    AvroSinkError(Exception)
    ├── ConfigError(AvroSinkError, ValueError)       bad option value, sink URI, settings file
    ├── TableDefinitionError(AvroSinkError, ValueError)
    │   ├── UnsupportedColumnType                    table, column, mysql_type; suggests the closest type
    │   ├── DuplicateFieldName                       two columns sanitise to the same Avro name
    │   └── NoHandleKey                              no primary key and no NOT NULL unique index
    ├── RoutingError(AvroSinkError, ValueError)      invalid topic rule, two tables on one topic
    ├── EncodingError(AvroSinkError, ValueError)     table, column, schema id, short repr of the value
    ├── SourceError(AvroSinkError, ValueError)       malformed input file/message: location and reason
    ├── StateError(AvroSinkError)                    a state file damaged, unreadable or locked: path, problem
    │   ├── RegistryFileError                        the embedded registry's SQLite file
    │   └── CheckpointError                          a file under the job's checkpoint (Spark's logs, side files)
    └── RegistryError(AvroSinkError)                 status_code, error_code, subject, schema_id
        ├── RegistryUnavailable                      transport errors, 408/429/5xx (retryable)
        ├── SubjectNotFound          40401           ├── VersionNotFound       40402
        ├── SchemaNotFound           40403           ├── SubjectSoftDeleted    40404
        ├── SubjectNotSoftDeleted    40405           ├── VersionSoftDeleted    40406
        ├── VersionNotSoftDeleted    40407           ├── SubjectConfigNotFound 40408
        ├── SubjectModeNotFound      40409
        ├── IncompatibleSchema       409 / 40901     (registry's reasons in ``reasons``)
        ├── InvalidSchema            42201           ├── InvalidVersion        42202
        ├── InvalidCompatibilityLevel 42203          ├── InvalidMode           42204
        ├── OperationNotPermitted    42205 (read-only mode, import rules)
        ├── InvalidSubject           42208
        └── InvalidRuleSet           42210 (a data contract's rule that Confluent's validation refuses)

``REGISTRY_ERROR_CODES`` maps Confluent ``error_code`` values to these classes; ``registry_error_for``
is the one place that picks a class (code first, HTTP status as the fallback). Call sites never branch
on numeric codes.
"""

from __future__ import annotations

from typing import Any, ClassVar


class AvroSinkError(Exception):
    """Base class. ``str(err)`` is a complete sentence; keyword context is kept in ``context``."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.context))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[AvroSinkError], message: str, context: dict[str, Any]) -> AvroSinkError:
    err = cls.__new__(cls)
    AvroSinkError.__init__(err, message, **context)
    return err


class ConfigError(AvroSinkError, ValueError):
    """An option, sink URI or settings file has a value outside its valid set."""


class TableDefinitionError(AvroSinkError, ValueError):
    """A table definition cannot be turned into Avro schemas."""


class UnsupportedColumnType(TableDefinitionError):
    """A column's SQL type is not one MySQL/TiDB accepts (or not one this tool maps)."""


class DuplicateFieldName(TableDefinitionError):
    """Two columns of one table sanitise to the same Avro field name."""


class NoHandleKey(TableDefinitionError):
    """A table has neither a primary key nor a NOT NULL unique index, so it has no Kafka key."""


class RoutingError(AvroSinkError, ValueError):
    """A topic rule is invalid, or it would route two tables to one topic."""


class EncodingError(AvroSinkError, ValueError):
    """A row value cannot be encoded for its column."""


class SourceError(AvroSinkError, ValueError):
    """An input file or message is malformed; the message names where and why."""

    #: The line (or CSV record) of a file that is malformed, from the ``line`` context (set where it is known,
    #: as for every error of a CSV data file's records).
    line: int


class StateError(AvroSinkError):
    """A file the product keeps its state in is damaged, unreadable or locked; the message names the file, what
    was found and what to do. ``path`` is the file, ``problem`` a short word for what is wrong with it (``locked``,
    ``damaged``, ``incomplete``, ``missing``, ``unreadable``, ``newer-version`` ...). The CLI exits with 2: a rerun
    alone does not help, the file has to be seen to first."""


class RegistryFileError(StateError):
    """The embedded registry's SQLite file cannot be used (damaged, not a database, unreadable, locked)."""


class CheckpointError(StateError):
    """A file under the job's checkpoint (Spark's offsets, commits, metadata, source logs; job.json, tables.json,
    held-files.json, storage-files.json, dead letters) is torn, missing or unreadable."""


class RegistryError(AvroSinkError):
    """The schema registry answered with an error, or could not be reached."""

    retryable: ClassVar[bool] = False
    status_code: int | None
    error_code: int | None
    subject: str | None
    schema_id: int | None

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_code: int | None = None,
        subject: str | None = None,
        schema_id: int | None = None,
        **context: Any,
    ) -> None:
        super().__init__(
            message,
            status_code=status_code,
            error_code=error_code,
            subject=subject,
            schema_id=schema_id,
            **context,
        )


class RegistryUnavailable(RegistryError):
    """Transport failure, timeout, 408, 429 or 5xx: worth retrying."""

    retryable = True


class SubjectNotFound(RegistryError):
    pass


class VersionNotFound(RegistryError):
    pass


class SchemaNotFound(RegistryError):
    pass


class SubjectSoftDeleted(RegistryError):
    pass


class SubjectNotSoftDeleted(RegistryError):
    pass


class VersionSoftDeleted(RegistryError):
    pass


class VersionNotSoftDeleted(RegistryError):
    pass


class SubjectConfigNotFound(RegistryError):
    pass


class SubjectModeNotFound(RegistryError):
    pass


class IncompatibleSchema(RegistryError):
    """The registry refused a schema under the subject's compatibility level (HTTP 409)."""


class InvalidSchema(RegistryError):
    pass


class InvalidVersion(RegistryError):
    pass


class InvalidCompatibilityLevel(RegistryError):
    pass


class InvalidMode(RegistryError):
    pass


class OperationNotPermitted(RegistryError):
    pass


class InvalidSubject(RegistryError):
    pass


class InvalidRuleSet(RegistryError):
    """A ``ruleSet`` (or a config's default/override rule set) that the registry's rule validation refuses."""


REGISTRY_ERROR_CODES: dict[int, type[RegistryError]] = {
    40401: SubjectNotFound,
    40402: VersionNotFound,
    40403: SchemaNotFound,
    40404: SubjectSoftDeleted,
    40405: SubjectNotSoftDeleted,
    40406: VersionSoftDeleted,
    40407: VersionNotSoftDeleted,
    40408: SubjectConfigNotFound,
    40409: SubjectModeNotFound,
    409: IncompatibleSchema,
    40901: IncompatibleSchema,
    42201: InvalidSchema,
    42202: InvalidVersion,
    42203: InvalidCompatibilityLevel,
    42204: InvalidMode,
    42205: OperationNotPermitted,
    42208: InvalidSubject,
    42210: InvalidRuleSet,
}

# Fallback by HTTP status when the body carries no known error_code.
_STATUS_FALLBACK: dict[int, type[RegistryError]] = {
    408: RegistryUnavailable,
    409: IncompatibleSchema,  # both official clients key incompatibility on the status, not the code
    422: InvalidSchema,
    429: RegistryUnavailable,
}


def registry_error_for(status_code: int | None, error_code: int | None) -> type[RegistryError]:
    """Pick the most specific exception class for a registry answer.

    >>> registry_error_for(409, 40901).__name__
    'IncompatibleSchema'
    >>> registry_error_for(503, None).__name__
    'RegistryUnavailable'
    """
    if status_code == 409:
        return IncompatibleSchema
    if error_code is not None and error_code in REGISTRY_ERROR_CODES:
        return REGISTRY_ERROR_CODES[error_code]
    if status_code is None or status_code >= 500:
        return RegistryUnavailable
    return _STATUS_FALLBACK.get(status_code, RegistryError)


def shown_value(value: Any) -> str:
    """A setting's value in a message as the user wrote it (TOML's and TiCDC's spelling), not as a Python repr.

    >>> shown_value(True), shown_value("yes"), shown_value(3)
    ('true', "'yes'", '3')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)
