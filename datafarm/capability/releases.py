"""Hashes of released K versions, pinned in code.

A released bundle must never change (tasks pin it and audit re-runs under it). The manifest alone
cannot guard that, since an edit could rewrite the manifest too; this table is the second witness,
checked by tests/capability/test_bundle.py. Add a line when releasing a new version; never edit one.
"""

RELEASED: dict[str, str] = {
    "k1": "985dcf26b077464958dc5cebb673d98454bd99cdddcbe33e97d25a6a0e8c83a3",
    "k2": "052f5709b1a772992a96f8eafd3749753ef4d4a5c746606fb2d357e270c08453",
}
