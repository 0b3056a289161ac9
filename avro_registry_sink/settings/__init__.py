"""Configuration: the frozen settings models and their readers (sink URIs, TOML, environment), and the table
of every TiCDC key with what this product does with it."""
