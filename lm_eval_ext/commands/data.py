"""The ``lm-eval-ext data`` command group: fetch, verify and where."""
import argparse
import sys
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlsplit

from ..data import config
from ..data.errors import DataError, HostUnreachable
from ..data.registry import DATASETS, dataset_files
from ..data.resolve import local_candidates, resolve, sha256_of
from ..data.spider import spider_database_dir, spider_database_location


def add_data_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``data`` (``fetch``, ``verify``, ``where``) to a CLI's subparsers; each sets ``func(args) -> exit code``."""
    data = subparsers.add_parser("data", help="fetch, verify and locate the benchmark datasets",
                                 description="Fetch, verify and locate the benchmark datasets.")
    sub = data.add_subparsers(dest="data_command", required=True)
    for name, summary, text in (
        ("fetch", _fetched, "make every registered file available locally, downloading what is missing"),
        ("verify", _verified, "check the sha256 of every registered file found locally"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("names", nargs="*", metavar="NAME", help=f"datasets (default: {', '.join(DATASETS)})")
        command.set_defaults(func=lambda args, summary=summary: _each_dataset(args.names, summary))
    where = sub.add_parser("where", help="print where a dataset (file) is and how it was found")
    where.add_argument("name", metavar="NAME", choices=DATASETS, help="dataset")
    where.add_argument("file", nargs="?", metavar="FILE", help="file path relative to the dataset folder")
    where.add_argument("--path", dest="explicit", metavar="PATH", help="an explicit path to use for FILE")
    where.set_defaults(func=where_command)
    return data


def _each_dataset(names: list[str], summary: Callable[[str, list[str]], str]) -> int:
    """Print ``summary(name, problems)`` for each dataset named (default: all), then the problems it collected
    (the first five distinct ones); exit 2 for an unknown name, 1 for a problem."""
    if unknown := [n for n in names if n not in DATASETS]:
        print(f"Unknown dataset(s) {', '.join(unknown)}. Known datasets: {', '.join(DATASETS)}.", file=sys.stderr)
        return 2
    problems: list[str] = []
    for name in names or DATASETS:
        print(summary(name, problems))
        if name == "spider":
            try:
                print(f"spider databases: {spider_database_dir()}")
            except DataError as err:
                print(f"spider databases: not available. {err}")
    # fetch: a problem per file (the members of one unreadable archive sharing one message), and one for the
    # files of an unreachable host not tried; verify: one per dataset
    shown = list(dict.fromkeys(problems))[:5]
    for message in shown:
        print(message, file=sys.stderr)
    if len(problems) > len(shown):
        print(f"{len(problems)} problems in all; the first {len(shown)} distinct ones are shown above.",
              file=sys.stderr)
    return 1 if problems else 0


def _fetched(name: str, problems: list[str]) -> str:
    """Resolve every registered file of dataset ``name``: how many were found where, or failed. Once a download
    host could not be reached, its other files are only looked for locally (offline, each would wait its tries)."""
    counts: Counter[str] = Counter()
    unreachable: dict[str, int] = {}  # host -> its files not downloaded since
    for pinned in dataset_files(name):
        host = urlsplit(config.download_url(pinned.url)).netloc if pinned.url else None
        if host in unreachable and not any(path.is_file() for _, path in local_candidates(pinned)):
            unreachable[host] += 1
            continue
        try:
            counts[resolve(name, pinned.path).how] += 1
        except HostUnreachable as err:
            counts["failed"] += 1
            problems.append(str(err))
            unreachable.setdefault(err.host, 0)
        except DataError as err:
            counts["failed"] += 1
            problems.append(str(err))
    for host, files in unreachable.items():
        if files:
            counts["not tried"] += files
            problems.append(f"{name}: {files} more file(s) from {host} were not tried, as {host} could not be "
                            f"reached (above). Run `lm-eval-ext data fetch {name}` again once it can be.")
    return f"{name}: {sum(counts.values())} files ({', '.join(f'{n} {how}' for how, n in sorted(counts.items()))})"


def _verified(name: str, problems: list[str]) -> str:
    """Hash every local copy (mirror and cache) of the registered files of ``name``; print each mismatch."""
    counts: Counter[str] = Counter()
    for pinned in dataset_files(name):
        copies = [(where, p) for where, p in local_candidates(pinned) if p.is_file()]
        if not copies:
            counts["missing"] += 1
            print(f"missing: {name}/{pinned.path}")
        for where, path in copies:
            counts["ok" if (actual := sha256_of(path)) == pinned.sha256 else "mismatched"] += 1
            if actual != pinned.sha256:
                print(f"MISMATCH ({where}): {path}: expected sha256 {pinned.sha256}, got {actual}")
    if counts["mismatched"]:
        problems.append(f"{counts['mismatched']} file(s) of {name} do not match the registry: replace them "
                        f"(`lm-eval-ext data fetch {name}` after deleting a bad cache copy).")
    return f"{name}: {counts['ok']} ok, {counts['mismatched']} mismatched, {counts['missing']} missing"


def where_command(args: argparse.Namespace) -> int:
    """Print the resolved path and how it was found (explicit, mirror, cache, download)."""
    try:
        if args.file is not None:
            path, how = resolve(args.name, args.file, args.explicit)
        elif args.name == "spider":
            spider_database_dir()  # raises the how-to-get-it message when unusable
            path, how = spider_database_location()
        else:
            mirror, cache = config.mirror_dir(), config.cache_dir() / args.name
            path, how = ((mirror / args.name, "mirror") if mirror is not None and (mirror / args.name).is_dir()
                         else (cache, "cache" if cache.is_dir() else "cache, nothing fetched yet"))
    except DataError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"{path}  ({how})")
    return 0
