"""The registry (manifest.json): every dataset file with its sha256, size and canonical source."""
import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import DataError

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
# Literal (the tests check it against the manifest) so that importing the data layer does not parse the manifest.
DATASETS: tuple[str, ...] = ("lieder", "lost_in_the_middle", "magnifico", "spider", "elitr_bench")


@dataclass(frozen=True)
class PinnedFile:
    """A registered file: its pinned ``url``, else the ``member`` (a path suffix) of ``archive_url``, else a
    ``note`` saying why it has no public source."""

    dataset: str
    path: str
    sha256: str
    size: int
    url: str | None = None
    archive_url: str | None = None
    member: str | None = None
    note: str | None = None


@lru_cache(maxsize=1)
def _registry() -> dict[str, dict[str, PinnedFile]]:
    raw = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["datasets"]
    # No "url" key: the file is at url_base + path; an explicit null: it has no URL of its own.
    return {name: {f["path"]: PinnedFile(name, f["path"], f["sha256"], f["size"],
                                         f.get("url", entry["url_base"] + f["path"]),
                                         *(f.get("archive", {}).get(key) for key in ("url", "member")), f.get("note"))
                   for f in entry["files"]} for name, entry in raw.items()}


def _files_of(dataset: str) -> dict[str, PinnedFile]:
    if dataset not in _registry():
        raise DataError(f"Unknown dataset {dataset!r}. Known datasets: {', '.join(DATASETS)}.")
    return _registry()[dataset]


def dataset_files(dataset: str) -> list[PinnedFile]:
    """All registered files of a dataset, sorted by path."""
    return sorted(_files_of(dataset).values(), key=lambda pinned: pinned.path)


def pinned_file(dataset: str, path: str) -> PinnedFile:
    """The registry entry for ``path`` (relative to the dataset folder); DataError if unknown."""
    files = _files_of(dataset)
    if path in files:
        return files[path]
    close = difflib.get_close_matches(path, list(files), n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    extra = " Spider databases are not registered files: use spider_database_dir()." if dataset == "spider" else ""
    raise DataError(f"{path!r} is not a registered file of dataset {dataset!r}.{hint}{extra} "
                    f"`lm-eval-ext data verify {dataset}` lists the registered files that are present.")
