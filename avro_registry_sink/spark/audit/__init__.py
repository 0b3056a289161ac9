"""After a run: ``verify`` reconciles what it delivered with its source, ``replay`` puts its dead letters through the
job's stages again."""
