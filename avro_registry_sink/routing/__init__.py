"""Which tables, columns, topics and subjects: TiCDC's table filter, column selectors, topic rules and dispatch,
and the owner of each topic and subject across runs."""
