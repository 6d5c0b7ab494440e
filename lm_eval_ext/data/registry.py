"""The registry of dataset files, loaded from the packaged manifest.json."""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import DataError

MANIFEST_PATH = Path(__file__).with_name("manifest.json")

# Kept literal (and checked against the manifest by the tests) so importing the
# data layer does not parse the manifest.
DATASETS: tuple[str, ...] = ("lieder", "lost_in_the_middle", "magnifico", "spider", "elitr_bench")


@dataclass(frozen=True)
class PinnedFile:
    """One registered file: where it comes from and what it must hash to.

    ``url`` is the pinned canonical download URL, or None when the file is
    only found inside an archive (``archive_url`` + ``member``, the member's
    path suffix) or has no public source at all (``note`` then says why).
    """

    dataset: str
    path: str
    sha256: str
    size: int
    url: str | None = None
    archive_url: str | None = None
    member: str | None = None
    note: str | None = None

    @property
    def source(self) -> str:
        """A human-readable description of the canonical source."""
        if self.url:
            return self.url
        return f"member {self.member} of {self.archive_url}" if self.archive_url else "no canonical download URL"


@lru_cache(maxsize=1)
def _registry() -> dict[str, dict[str, PinnedFile]]:
    raw = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    # A file whose entry has no "url" key lives at url_base + its path; an
    # explicit null means there is no direct URL.
    return {name: {item["path"]: PinnedFile(name, item["path"], item["sha256"], item["size"],
                                            item.get("url", entry["url_base"] + item["path"]),
                                            item.get("archive", {}).get("url"), item.get("archive", {}).get("member"),
                                            item.get("note"))
                   for item in entry["files"]}
            for name, entry in raw["datasets"].items()}


def _check_dataset(dataset: str) -> dict[str, PinnedFile]:
    files = _registry().get(dataset)
    if files is None:
        raise DataError(f"Unknown dataset {dataset!r}. Known datasets: {', '.join(DATASETS)}.")
    return files


def dataset_files(dataset: str) -> list[PinnedFile]:
    """All registered files of a dataset, sorted by path."""
    return sorted(_check_dataset(dataset).values(), key=lambda pinned: pinned.path)


def all_files() -> list[PinnedFile]:
    """Every registered file of every dataset."""
    return [pinned for name in DATASETS for pinned in dataset_files(name)]


def pinned_file(dataset: str, path: str) -> PinnedFile:
    """The registry entry for ``path`` (relative to the dataset folder); DataError if unknown."""
    files = _check_dataset(dataset)
    pinned = files.get(path)
    if pinned is None:
        close = difflib.get_close_matches(path, list(files), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        extra = " Spider databases are not registered files: use spider_database_dir()." if dataset == "spider" else ""
        raise DataError(
            f"{path!r} is not a registered file of dataset {dataset!r}.{hint}{extra} "
            f"`lm-eval-ext data verify {dataset}` lists the registered files that are present."
        )
    return pinned
