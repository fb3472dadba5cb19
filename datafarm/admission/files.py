"""The files of an episode folder as q records them: every regular file below `episodes/<id>/`
except `admission.json` itself, by `/`-separated relative path, with its sha256; and the names of
the files stages 8-10 write there."""

from __future__ import annotations

from pathlib import Path

from datafarm.hashing import sha256_file

ADMISSION_FILE = "admission.json"
"""q's file name inside the episode folder."""
VERIFICATION_FILE = "verification.json"
"""The verifier's results (stage 8) inside the episode folder; q's `verifier` must equal them."""
REVIEW_FILE = "review.json"
"""The reviewer's verdict (stage 9) inside the episode folder; q's `review` must equal it."""


def episode_files(folder: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(relative path -> sha256 of every file but admission.json, [(relative path, problem)]).

    Problems name what cannot be part of an admitted episode: symbolic links (they may point
    outside the folder and change without the folder changing), anything that is not a regular
    file or folder, and leftover temporary files (names starting with `.`, which atomic writers use
    while a file is being written)."""
    hashes: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            problems.append((rel, "a symbolic link; an admitted episode holds regular files only"))
        elif path.is_dir():
            continue
        elif not path.is_file():
            problems.append((rel, "not a regular file"))
        elif rel == ADMISSION_FILE:
            continue
        elif any(part.startswith(".") for part in rel.split("/")):
            problems.append((rel, "a hidden or temporary file (a write in progress or left by a crash)"))
        else:
            hashes[rel] = sha256_file(path)
    return hashes, problems
