"""The ``lm-eval-ext data`` command group: fetch, verify and where."""
import argparse
import sys
from collections import Counter
from collections.abc import Callable

from . import config
from .errors import DataError
from .registry import DATASETS, dataset_files
from .resolve import local_candidates, resolve, sha256_of
from .spider import spider_database_dir, spider_database_location


def add_data_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``data`` (``fetch``, ``verify``, ``where``) to a CLI's subparsers; each sets ``func(args) -> exit code``."""
    data = subparsers.add_parser("data", help="fetch, verify and locate the benchmark datasets",
                                 description="Fetch, verify and locate the benchmark datasets.")
    sub = data.add_subparsers(dest="data_command", required=True)
    for name, func, text in (
        ("fetch", fetch_command, "make every registered file available locally, downloading what is missing"),
        ("verify", verify_command, "check the sha256 of every registered file found locally"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("names", nargs="*", metavar="NAME", help=f"datasets (default: {', '.join(DATASETS)})")
        command.set_defaults(func=func)
    where = sub.add_parser("where", help="print where a dataset (file) is and how it was found")
    where.add_argument("name", metavar="NAME", choices=DATASETS, help="dataset")
    where.add_argument("file", nargs="?", metavar="FILE", help="file path relative to the dataset folder")
    where.add_argument("--path", dest="explicit", metavar="PATH", help="an explicit path to use for FILE")
    where.set_defaults(func=where_command)
    return data


def _each_dataset(args: argparse.Namespace, summary: Callable[[str], str]) -> bool:
    """Print ``summary(name)`` for each dataset named (default: all); False, said on stderr, if one is unknown."""
    if unknown := [n for n in args.names if n not in DATASETS]:
        print(f"Unknown dataset(s) {', '.join(unknown)}. Known datasets: {', '.join(DATASETS)}.", file=sys.stderr)
        return False
    for name in args.names or DATASETS:
        print(summary(name))
        if name == "spider":
            try:
                print(f"spider databases: {spider_database_dir()}")
            except DataError as err:
                print(f"spider databases: not available. {err}")
    return True


def fetch_command(args: argparse.Namespace) -> int:
    """Resolve every registered file of the datasets; exit 1 if any could not be had."""
    errors: list[str] = []

    def summary(name: str) -> str:
        counts: Counter[str] = Counter()
        for pinned in dataset_files(name):
            try:
                counts[resolve(name, pinned.path).how] += 1
            except DataError as err:
                counts["failed"] += 1
                errors.append(str(err))
        return f"{name}: {sum(counts.values())} files ({', '.join(f'{n} {how}' for how, n in sorted(counts.items()))})"

    if not _each_dataset(args, summary):
        return 2
    shown = list(dict.fromkeys(errors))[:5]  # the members of one unreadable archive share one message
    for message in shown:
        print(message, file=sys.stderr)
    if len(errors) > len(shown):
        print(f"{len(errors)} files failed in all; the first {len(shown)} distinct errors are shown above.",
              file=sys.stderr)
    return 1 if errors else 0


def verify_command(args: argparse.Namespace) -> int:
    """Hash every local copy (mirror and cache) of the registered files; exit 1 on any mismatch."""
    counts: Counter[str] = Counter()

    def summary(name: str) -> str:
        before = counts.copy()
        for pinned in dataset_files(name):
            copies = [(where, p) for where, p in local_candidates(pinned) if p.is_file()]
            if not copies:
                counts["missing"] += 1
                print(f"missing: {name}/{pinned.path}")
            for where, path in copies:
                counts["ok" if (actual := sha256_of(path)) == pinned.sha256 else "mismatched"] += 1
                if actual != pinned.sha256:
                    print(f"MISMATCH ({where}): {path}: expected sha256 {pinned.sha256}, got {actual}")
        new = counts - before
        return f"{name}: {new['ok']} ok, {new['mismatched']} mismatched, {new['missing']} missing"

    if not _each_dataset(args, summary):
        return 2
    if counts["mismatched"]:
        print(f"{counts['mismatched']} file(s) do not match the registry: replace them (`lm-eval-ext data fetch "
              "NAME` after deleting a bad cache copy).", file=sys.stderr)
    return 1 if counts["mismatched"] else 0


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
