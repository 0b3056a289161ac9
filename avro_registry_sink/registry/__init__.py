"""avro-registry-sink."""
