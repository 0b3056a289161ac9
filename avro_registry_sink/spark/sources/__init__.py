"""The inputs as Spark streams (source URIs, the storage tree as a streaming source, changelog topics and files) and
their per-batch executor passes, which parse the input and hand its rows to the encode stage."""
