"""The Spider 1.0 SQLite databases MAGNIFICo runs against: no stable URL, so the user provides them."""
from pathlib import Path

from . import config
from .errors import DataError

_HOW_TO_GET = ("The Spider databases have no stable download URL, so lm-eval-ext cannot fetch them: download the "
               "official Spider 1.0 release (https://yale-lily.github.io/spider), unzip it, and set "
               f"{config.SPIDER_DIR_ENV} to its `database` folder (the one holding <db_id>/<db_id>.sqlite), or place "
               f"that folder at ${config.DATA_DIR_ENV}/spider/database.")


def spider_database_location() -> tuple[Path, str]:
    """The configured database directory (not checked) and the setting it came from."""
    if (explicit := config.path_from(config.SPIDER_DIR_ENV)) is not None:
        return explicit, config.SPIDER_DIR_ENV
    if (mirror := config.mirror_dir()) is not None:
        return mirror / "spider" / "database", "mirror"
    raise DataError(f"No Spider database directory is configured ({config.SPIDER_DIR_ENV} and "
                    f"{config.DATA_DIR_ENV} are both unset). {_HOW_TO_GET}")


def spider_database_dir() -> Path:
    """The directory of ``<db_id>/<db_id>.sqlite`` files: ``$LM_EVAL_EXT_SPIDER_DIR``, else the mirror's
    ``spider/database``; DataError, saying how to get Spider 1.0, when unset, missing or empty."""
    directory, origin = spider_database_location()
    if not directory.is_dir():
        raise DataError(f"The Spider database directory {directory} (from {origin}) does not exist. {_HOW_TO_GET}")
    if not any((sub / f"{sub.name}.sqlite").is_file() for sub in directory.iterdir() if sub.is_dir()):
        raise DataError(f"The Spider database directory {directory} (from {origin}) holds no "
                        f"<db_id>/<db_id>.sqlite file. {_HOW_TO_GET}")
    return directory


def spider_database_path(db_id: str) -> Path:
    """The .sqlite file of database ``db_id``, the folder matched case-insensitively (the release spells four
    ids, e.g. ``cre_Doc_Tracking_DB``, in mixed case, MAGNIFICo in lower case); DataError if it is absent."""
    directory = spider_database_dir()
    if (exact := directory / db_id / f"{db_id}.sqlite").is_file():
        return exact
    for candidate in directory.glob("*/*.sqlite"):
        if candidate.parent.name.lower() == candidate.stem.lower() == db_id.lower():
            return candidate
    raise DataError(f"Spider database {db_id!r} is missing: {exact} does not exist. Copy "
                    f"database/{db_id}/{db_id}.sqlite from the official Spider 1.0 release "
                    f"(https://yale-lily.github.io/spider) to {directory / db_id}/, or point {config.SPIDER_DIR_ENV} "
                    "to a complete Spider `database` folder.")
