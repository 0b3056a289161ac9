"""SQL type mapping."""
