"""The append-only, hash-chained attempt ledger L."""
