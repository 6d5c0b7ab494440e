"""The data layer: a pinned, checksummed registry of dataset files (manifest.json) and how to get each one: an
explicit path, the mirror ($LM_EVAL_EXT_DATA_DIR), the user cache, else a download."""
from .errors import DataError
from .registry import DATASETS, PinnedFile, dataset_files, pinned_file
from .resolve import Resolution, read_zip_member, resolve, resolve_file, sha256_of
from .spider import spider_database_dir, spider_database_path

__all__ = ["DATASETS", "DataError", "PinnedFile", "Resolution", "dataset_files", "pinned_file", "read_zip_member",
           "resolve", "resolve_file", "sha256_of", "spider_database_dir", "spider_database_path"]
