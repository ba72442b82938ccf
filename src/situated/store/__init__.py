"""Storage: the embedded SQLite store, its migrations, ledger and vector index."""
