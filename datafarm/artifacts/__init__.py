"""Pydantic schemas of every artifact datafarm reads or writes: the request, the calibration clip,
G, T, S, C (expert manifest), J, R, B, episode records, admission records and ledger entries."""
