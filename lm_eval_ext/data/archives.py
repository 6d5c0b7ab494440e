"""Reading zip members in memory, never onto disk (encrypted ones too), and refusing unsafe member names."""
import stat
import zipfile
import zlib
from pathlib import Path, PureWindowsPath

from .errors import NOT_SAVED, DataError

_READ_ERRORS = (RuntimeError, NotImplementedError, zipfile.BadZipFile, zlib.error, EOFError, OSError)


def check_member_name(info: zipfile.ZipInfo, archive: Path | str) -> None:
    """Refuse a member whose name could land outside an extraction directory, or a symbolic link."""
    path = PureWindowsPath(info.filename)  # both separators and drive letters: an archive may come from any system
    # Unix zips keep the st_mode in the high 16 bits of external_attr.
    link = "symbolic link" if stat.S_ISLNK(info.external_attr >> 16) else None
    if problem := "absolute path" if path.anchor else "'..' path component" if ".." in path.parts else link:
        raise DataError(f"Unsafe entry {info.filename!r} in archive {archive}: {problem}. Nothing was extracted.")


def _open_zip(path: Path, shown: str | None = None) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        if shown is not None:  # a transient download: its path means nothing to the user
            raise DataError(f"{shown} is not a readable zip archive ({err}): the download is corrupted or truncated. "
                            + NOT_SAVED) from None
        raise DataError(f"{path} is not a readable zip archive ({err}). It is corrupted or truncated: "
                        "delete it and fetch it again (`lm-eval-ext data fetch NAME`).") from None


def read_zip_bytes(path: Path, member: str, password: bytes | None = None) -> bytes:
    """Read one member of the zip at ``path`` into memory (ZipCrypto yes, AES no); DataError for a corrupted
    archive, a wrong or missing password, or a missing member."""
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
    """``{suffix: bytes}`` of the zip members whose path ends with each suffix (at a '/' boundary); an unsafe
    name or a link is refused all the same (:func:`check_member_name`). Errors call the archive ``shown``."""
    found: dict[str, bytes] = {}
    with _open_zip(path, shown) as zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            for suffix in set(suffixes) - found.keys():
                if name == suffix or name.endswith("/" + suffix):
                    check_member_name(info, shown)
                    try:
                        found[suffix] = zf.read(info)
                    except _READ_ERRORS as err:
                        raise DataError(f"Member {info.filename!r} of {shown} could not be read: {err}.") from None
    return found
