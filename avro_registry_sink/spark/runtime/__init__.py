"""Spark itself: sessions and their settings, the Maven packages, the JVM kept quiet, the Python that Spark starts on
the driver, spark-submit (its entry file and how this environment runs it) and the executors' packed environment."""
