"""The data layer: a pinned, checksummed registry of dataset files and how to get them.

Resolution order for a file: an explicit path, the mirror
(``$LM_EVAL_EXT_DATA_DIR``), the user cache (``$LM_EVAL_EXT_CACHE_DIR`` or
pooch's ``os_cache``), then a verified, atomic download with pooch.
"""
from .archives import safe_extract
from .errors import DataError
from .registry import DATASETS, PinnedFile, dataset_files, pinned_file
from .resolve import Resolution, read_zip_member, resolve, resolve_file
from .spider import spider_database_dir, spider_database_path

__all__ = [
    "DATASETS",
    "DataError",
    "PinnedFile",
    "Resolution",
    "dataset_files",
    "pinned_file",
    "read_zip_member",
    "resolve",
    "resolve_file",
    "safe_extract",
    "spider_database_dir",
    "spider_database_path",
]
