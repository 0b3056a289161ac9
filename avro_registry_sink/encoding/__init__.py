"""The encoder: rows of a table version -> Confluent-framed Avro key and value bytes (the columnar encoder the
stages run, its binary primitives, and the per-row reference)."""
