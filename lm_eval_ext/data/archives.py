"""Archives: reading (encrypted) zip members in memory, and safe zip/tar extraction."""
from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from .errors import DataError

_DRIVE = re.compile(r"^[A-Za-z]:")


def check_member_name(name: str, archive: Path | str) -> None:
    """Reject member names that could land outside the extraction directory."""
    normalized = name.replace("\\", "/")
    if normalized.startswith("/") or _DRIVE.match(normalized):
        raise DataError(f"Unsafe entry {name!r} in archive {archive}: absolute path. Nothing was extracted.")
    if ".." in PurePosixPath(normalized).parts:
        raise DataError(f"Unsafe entry {name!r} in archive {archive}: '..' path component. Nothing was extracted.")


def _zip_is_symlink(info: zipfile.ZipInfo) -> bool:
    # Unix zips keep the st_mode in the high 16 bits of external_attr.
    return stat.S_ISLNK(info.external_attr >> 16)


def _open_zip(path: Path, shown: str | None = None) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        if shown is not None:  # a transient download: its path means nothing to the user
            raise DataError(
                f"{shown} is not a readable zip archive ({err}): the download is corrupted or truncated. "
                "Nothing was saved. Retry later; if it persists, the upstream file changed and the registry "
                "(lm_eval_ext/data/manifest.json) needs review."
            ) from None
        raise DataError(
            f"{path} is not a readable zip archive ({err}). It is corrupted or truncated: "
            "delete it and fetch it again (`lm-eval-ext data fetch NAME`)."
        ) from None


def read_zip_bytes(path: Path, member: str, password: bytes | None = None) -> bytes:
    """Read one member of the zip at ``path`` into memory (never onto disk).

    Handles ZipCrypto-encrypted members (Python's zipfile cannot read AES).
    A corrupted archive, a wrong or missing password, or a missing member
    raises DataError.
    """
    with _open_zip(path) as zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            names = [n for n in zf.namelist() if not n.endswith("/")]
            raise DataError(
                f"Archive {path} has no member {member!r}. Its members are: {', '.join(names[:20])}"
                + (" ..." if len(names) > 20 else "")
            ) from None
        encrypted = bool(info.flag_bits & 0x1)
        try:
            return zf.read(info, pwd=password)
        except RuntimeError as err:
            # zipfile reports a bad or absent password as RuntimeError.
            if encrypted and password is None:
                raise DataError(f"Member {member!r} of {path} is encrypted: a password is required.") from None
            raise DataError(f"Wrong password for member {member!r} of {path} ({err}).") from None
        except NotImplementedError as err:
            raise DataError(f"Cannot read member {member!r} of {path}: {err}.") from None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
            # With ZipCrypto a wrong password passes the 1-byte check 1 time in 256
            # and then fails here, as garbage; say so.
            maybe = " or the password is wrong" if encrypted else ""
            raise DataError(
                f"Member {member!r} of {path} could not be read ({err}): the archive is corrupted{maybe}. "
                "Delete it and fetch it again (`lm-eval-ext data fetch NAME`)."
            ) from None


def read_members_by_suffix(path: Path, suffixes: list[str], shown: str | None = None) -> dict[str, bytes]:
    """Read the zip members whose path ends with each suffix (at a '/' boundary).

    Returns ``{suffix: bytes}`` for the suffixes found. Member names are never
    used as output paths; links are refused all the same. Errors name the
    archive as ``shown`` (e.g. the URL it was downloaded from) when given.
    """
    found: dict[str, bytes] = {}
    wanted = set(suffixes)
    where = shown or str(path)
    with _open_zip(path, shown) as zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            for suffix in wanted - found.keys():
                if name == suffix or name.endswith("/" + suffix):
                    check_member_name(info.filename, where)
                    if _zip_is_symlink(info):
                        raise DataError(f"Unsafe entry {info.filename!r} in archive {where}: symbolic link.")
                    try:
                        found[suffix] = zf.read(info)
                    except (RuntimeError, zipfile.BadZipFile, zlib.error, OSError) as err:
                        raise DataError(f"Member {info.filename!r} of {where} could not be read: {err}.") from None
    return found


def _zip_entries(zf: zipfile.ZipFile, path: Path, members: list[str] | None) -> list[zipfile.ZipInfo]:
    infos = zf.infolist() if members is None else [_pick(zf.getinfo, m, path) for m in members]
    for info in infos:
        check_member_name(info.filename, path)
        if _zip_is_symlink(info):
            raise DataError(f"Unsafe entry {info.filename!r} in archive {path}: symbolic link. Nothing was extracted.")
    return infos


def _tar_entries(tf: tarfile.TarFile, path: Path, members: list[str] | None) -> list[tarfile.TarInfo]:
    infos = tf.getmembers() if members is None else [_pick(tf.getmember, m, path) for m in members]
    for info in infos:
        check_member_name(info.name, path)
        if info.issym() or info.islnk():
            raise DataError(f"Unsafe entry {info.name!r} in archive {path}: link. Nothing was extracted.")
        if not (info.isfile() or info.isdir()):
            raise DataError(f"Unsafe entry {info.name!r} in archive {path}: special file. Nothing was extracted.")
    return infos


def _pick(getter, member: str, path: Path):
    try:
        return getter(member)
    except KeyError:
        raise DataError(f"Archive {path} has no member {member!r}. Nothing was extracted.") from None


def safe_extract(archive_path: str | os.PathLike, dest_dir: str | os.PathLike, members: list[str] | None = None,
                 password: bytes | None = None) -> Path:
    """Extract a zip or tar archive (all entries, or ``members``) into ``dest_dir``.

    Every entry is checked first: ``..`` components, absolute paths, drive
    letters, links and special files raise DataError naming the entry. The
    archive is extracted into a temporary directory next to ``dest_dir``,
    which is renamed into place only when everything succeeded; ``dest_dir``
    must not exist yet (or be empty). Returns ``dest_dir``.
    """
    archive, dest = Path(archive_path), Path(dest_dir)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DataError(f"Cannot extract {archive} into {dest}: it already exists and is not empty.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".extract"))
    try:
        if zipfile.is_zipfile(archive):
            with _open_zip(archive) as zf:
                for info in _zip_entries(zf, archive, members):
                    zf.extract(info, tmp, pwd=password)
        elif archive.is_file() and tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                # The "data" filter is a second line of defence after our checks.
                tf.extractall(tmp, members=_tar_entries(tf, archive, members), filter="data")
        else:
            raise DataError(f"{archive} is neither a zip nor a tar archive (or it is corrupted).")
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    except (RuntimeError, zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, OSError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"Extracting {archive} failed ({err}); nothing was extracted.") from None
    except BaseException:  # DataError from the checks, KeyboardInterrupt, ...
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
