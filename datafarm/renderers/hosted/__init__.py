"""Adapters for hosted video models (MiniMax, Seedance): submit a job with the reference frames,
control video and K's prompt, poll with backoff, download, record cost, honour rate limits."""
