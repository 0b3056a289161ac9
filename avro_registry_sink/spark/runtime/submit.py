"""The spark-submit entry point: ``spark-submit [options] submit.py run --source ... [run options]``.

spark-submit runs a Python *file*, not a console script: this file is that application (the ``package``
command copies it to ``dist/submit.py`` next to the executor environment). Its arguments are the CLI's
(``run ...``); the session it builds keeps spark-submit's ``--master``, ``--deploy-mode`` and ``--conf``
settings (see :func:`~avro_registry_sink.spark.runtime.session.local_session`). What the ``spark-submit`` command runs
it with is :mod:`avro_registry_sink.spark.runtime.submit_env`.

::

    spark-submit --master spark://host:7077 \\
      --archives dist/executor-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
      --conf spark.pyspark.driver.python=$(which python) \\
      dist/submit.py run --source 's3://bucket/cdc?endpoint=...' --checkpoint 's3://bucket/ck?...' ...
"""

if __name__ == "__main__":  # pragma: no cover - run by spark-submit
    from avro_registry_sink.cli import main

    main()
