"""Avro schema derivation."""
