"""Maintainer tool: refresh manifest.json (the registry) from a data mirror.

Usage: ``python -m lm_eval_ext.data.manifest MIRROR_DIR``

It hashes every data file of the mirror (whose layout is the registry's) with
pooch's ``file_hash``: a registered file gets its new sha256 and size and keeps
its source (a URL of its own, an archive member, or a note why there is none);
a new file is added at its dataset's ``url_base``. Registered files the mirror
lacks stay as they are: the Lost in the Middle multi-document QA and kv-300
files, pinned from the checksum table of lost_in_the_middle/FORMAT.md in
nelson-liu/lost-in-the-middle@29b8a6d. Users never run it; the generated
manifest.json ships inside the package.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pooch import file_hash

from .registry import DATASETS, MANIFEST_PATH


def _is_data_file(dataset: str, rel: str) -> bool:
    # The mirror's .md files document it; spider/database/ has no stable URL and
    # is reached through spider_database_dir() instead.
    return not rel.endswith(".md") and not (dataset == "spider" and rel.startswith("database/"))


def build(mirror: Path, current: dict) -> dict:
    """The manifest ``current`` with the mirror's files hashed again (and new ones added)."""
    datasets = {}
    for name in DATASETS:
        root = mirror / name
        if not root.is_dir():
            raise SystemExit(f"{root} is missing: MIRROR_DIR must hold the folders {', '.join(DATASETS)}")
        entries = {entry["path"]: entry for entry in current["datasets"][name]["files"]}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if _is_data_file(name, rel):
                entries[rel] = {**entries.get(rel, {"path": rel}), "sha256": file_hash(str(path)),
                                "size": path.stat().st_size}
        datasets[name] = {"url_base": current["datasets"][name]["url_base"],
                          "files": [entries[k] for k in sorted(entries)]}
    return {"format": 1, "datasets": datasets}


def dumps(manifest: dict) -> str:
    """Compact JSON with one line per file, so diffs stay readable."""
    lines = ['{"format": %d, "datasets": {' % manifest["format"]]
    names = list(manifest["datasets"])
    for n, name in enumerate(names):
        entry = manifest["datasets"][name]
        lines.append(f' {json.dumps(name)}: {{"url_base": {json.dumps(entry["url_base"])}, "files": [')
        files = entry["files"]
        lines += [f"  {json.dumps(f)}" + ("," if i < len(files) - 1 else "") for i, f in enumerate(files)]
        lines.append(" ]}" + ("," if n < len(names) - 1 else ""))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Refresh the packaged manifest.json from MIRROR_DIR (or write the result to --output)."""
    parser = argparse.ArgumentParser(prog="python -m lm_eval_ext.data.manifest", description=__doc__.split("\n")[0])
    parser.add_argument("mirror", type=Path, help="mirror directory (the registry's layout)")
    parser.add_argument("--output", type=Path, default=MANIFEST_PATH, help="where to write (default: the packaged manifest)")
    args = parser.parse_args(argv)
    manifest = build(args.mirror, json.loads(MANIFEST_PATH.read_text(encoding="utf-8")))
    args.output.write_text(dumps(manifest), encoding="utf-8")
    count = sum(len(d["files"]) for d in manifest["datasets"].values())
    print(f"wrote {count} file entries to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
