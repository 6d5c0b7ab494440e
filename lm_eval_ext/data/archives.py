"""Archives: reading (encrypted) zip members in memory, and zip/tar extraction that refuses unsafe entries."""
import os
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PureWindowsPath

import pooch

from .errors import REVIEW, DataError

_READ_ERRORS = (RuntimeError, NotImplementedError, zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, OSError)


def check_member_name(name: str, archive: Path | str, link: str | None = None) -> None:
    """Refuse a member name that could land outside the extraction directory, or a link (``link`` names its kind)."""
    path = PureWindowsPath(name)  # both separators and drive letters: an archive may come from any system
    problem = "absolute path" if path.anchor else "'..' path component" if ".." in path.parts else link
    if problem:
        raise DataError(f"Unsafe entry {name!r} in archive {archive}: {problem}. Nothing was extracted.")


def _zip_link(info: zipfile.ZipInfo) -> str | None:
    # Unix zips keep the st_mode in the high 16 bits of external_attr.
    return "symbolic link" if stat.S_ISLNK(info.external_attr >> 16) else None


def _open_zip(path: Path, shown: str | None = None) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        if shown is not None:  # a transient download: its path means nothing to the user
            raise DataError(f"{shown} is not a readable zip archive ({err}): the download is corrupted or truncated. "
                            f"Nothing was saved. Retry later; if it persists, the upstream file changed and {REVIEW}"
                            ) from None
        raise DataError(f"{path} is not a readable zip archive ({err}). It is corrupted or truncated: "
                        "delete it and fetch it again (`lm-eval-ext data fetch NAME`).") from None


def read_zip_bytes(path: Path, member: str, password: bytes | None = None) -> bytes:
    """Read one member of the zip at ``path`` into memory, never onto disk (ZipCrypto yes, AES no).

    A corrupted archive, a wrong or missing password, or a missing member raises DataError.
    """
    with _open_zip(path) as zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            names = [n for n in zf.namelist() if not n.endswith("/")]
            raise DataError(f"Archive {path} has no member {member!r}. Its members are: {', '.join(names[:20])}"
                            + (" ..." if len(names) > 20 else "")) from None
        encrypted = bool(info.flag_bits & 0x1)
        try:
            return zf.read(info, pwd=password)
        except RuntimeError as err:  # zipfile's word for a bad or absent password
            if encrypted and password is None:
                raise DataError(f"Member {member!r} of {path} is encrypted: a password is required.") from None
            raise DataError(f"Wrong password for member {member!r} of {path} ({err}).") from None
        except NotImplementedError as err:
            raise DataError(f"Cannot read member {member!r} of {path}: {err}.") from None
        except _READ_ERRORS as err:
            # A wrong ZipCrypto password passes the 1-byte check 1 time in 256, then fails here as garbage.
            maybe = " or the password is wrong" if encrypted else ""
            raise DataError(f"Member {member!r} of {path} could not be read ({err}): the archive is corrupted{maybe}. "
                            "Delete it and fetch it again (`lm-eval-ext data fetch NAME`).") from None


def read_members_by_suffix(path: Path, suffixes: list[str], shown: str) -> dict[str, bytes]:
    """``{suffix: bytes}`` of the zip members whose path ends with each suffix (at a '/' boundary).

    Member names are never used as paths; links are refused all the same. Errors call the archive ``shown``.
    """
    found: dict[str, bytes] = {}
    with _open_zip(path, shown) as zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            for suffix in set(suffixes) - found.keys():
                if name == suffix or name.endswith("/" + suffix):
                    check_member_name(info.filename, shown, _zip_link(info))
                    try:
                        found[suffix] = zf.read(info)
                    except _READ_ERRORS as err:
                        raise DataError(f"Member {info.filename!r} of {shown} could not be read: {err}.") from None
    return found


def safe_extract(archive_path: str | os.PathLike, dest_dir: str | os.PathLike,
                 members: list[str] | None = None) -> Path:
    """Extract a zip or tar archive (all entries, or ``members``) into ``dest_dir`` with pooch's Unzip/Untar.

    Every entry is checked first (pooch would extract or quietly rename an unsafe one): ``..``, absolute
    paths, drive letters, links and special files raise DataError naming the entry. The output is renamed
    into place only when complete; ``dest_dir`` must be absent or empty. Returns ``dest_dir``.
    """
    archive, dest = Path(archive_path), Path(dest_dir)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DataError(f"Cannot extract {archive} into {dest}: it already exists and is not empty.")
    try:
        if zipfile.is_zipfile(archive):
            with _open_zip(archive) as zf:
                entries, extractor = [(i.filename, _zip_link(i)) for i in zf.infolist()], pooch.Unzip
        elif archive.is_file() and tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                entries = [(i.name, None if i.isfile() or i.isdir() else "link" if i.issym() or i.islnk()
                            else "special file") for i in tf.getmembers()]
            extractor = pooch.Untar
        else:
            raise DataError(f"{archive} is neither a zip nor a tar archive (or it is corrupted).")
        for name, link in entries:
            check_member_name(name, archive, link)
        if absent := set(members or ()) - {name for name, _ in entries}:
            raise DataError(f"Archive {archive} has no member {sorted(absent)[0]!r}. Nothing was extracted.")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}.", suffix=".extract") as tmp:
            # Absolute: pooch reads a relative extract_dir as relative to the archive's folder.
            out = os.path.join(os.path.abspath(tmp), "out")
            extractor(members=members, extract_dir=out)(str(archive), "download", None)
            if dest.exists():
                dest.rmdir()
            os.replace(out, dest)
    except _READ_ERRORS as err:
        raise DataError(f"Extracting {archive} failed ({err}); nothing was extracted.") from None
    return dest
