"""The encode stage: a table version's plan, the Arrow stage (``mapInArrow`` + the columnar encoder) and the JVM one
(SQL + ``to_avro``), what each batch's stage counts and sets aside, and the file sink's lines built where it runs."""
