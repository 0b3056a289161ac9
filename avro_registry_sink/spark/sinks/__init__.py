"""Where a batch's records go: the Kafka and file sinks, and the exactly-once slice writer in the executors' JVM
(``java/TransactionalSliceWriter.java``)."""
