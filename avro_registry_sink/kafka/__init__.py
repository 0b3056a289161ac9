"""The Kafka transport: TiCDC's Kafka settings, the confluent-kafka clients built from them, and exactly-once
delivery's protocol (transactional slices and commit tokens)."""
