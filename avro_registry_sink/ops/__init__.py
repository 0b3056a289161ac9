"""Operating a job: its Prometheus metrics, progress display and structured logs on the driver, and ``status``
from the checkpoint (Spark's checkpoint logs read without Spark)."""
