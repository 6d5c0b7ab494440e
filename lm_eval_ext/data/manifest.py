"""Maintainer tool: ``python -m lm_eval_ext.data.manifest MIRROR_DIR`` refreshes manifest.json (the registry).

Every data file of the mirror is hashed again (pooch's ``file_hash``); a registered file keeps its source, a
new one is added at its dataset's ``url_base``. Registered files the mirror lacks (the Lost in the Middle
multi-document QA and kv-300 files) keep their entries, from the checksum table of lost_in_the_middle/FORMAT.md
in nelson-liu/lost-in-the-middle@29b8a6d.
"""
import argparse
import json
from pathlib import Path

from pooch import file_hash

from .registry import DATASETS, MANIFEST_PATH


def build(mirror: Path, current: dict) -> dict:
    """The manifest ``current`` with the mirror's files hashed again (and new ones added)."""
    datasets = {}
    for name in DATASETS:
        if not (root := mirror / name).is_dir():
            raise SystemExit(f"{root} is missing: MIRROR_DIR must hold the folders {', '.join(DATASETS)}")
        entries = {entry["path"]: entry for entry in current["datasets"][name]["files"]}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            # .md files document the mirror; spider/database/ is user-provided (see spider.py).
            if not rel.endswith(".md") and not (name == "spider" and rel.startswith("database/")):
                entries[rel] = {**entries.get(rel, {"path": rel}), "sha256": file_hash(str(path)),
                                "size": path.stat().st_size}
        datasets[name] = {**current["datasets"][name], "files": [entries[k] for k in sorted(entries)]}
    return {"format": 1, "datasets": datasets}


def dumps(manifest: dict) -> str:
    """Compact JSON with one line per file, so diffs stay readable."""
    datasets = ",\n".join(f' {json.dumps(name)}: {{"url_base": {json.dumps(entry["url_base"])}, "files": [\n'
                          + ",\n".join(f"  {json.dumps(f)}" for f in entry["files"]) + "\n ]}"
                          for name, entry in manifest["datasets"].items())
    return f'{{"format": {manifest["format"]}, "datasets": {{\n{datasets}\n}}}}\n'


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m lm_eval_ext.data.manifest", description=__doc__.split("\n")[0])
    parser.add_argument("mirror", type=Path, help="mirror directory (the registry's layout)")
    parser.add_argument("--output", type=Path, default=MANIFEST_PATH, help="where to write (default: the packaged one)")
    args = parser.parse_args()
    manifest = build(args.mirror, json.loads(MANIFEST_PATH.read_text(encoding="utf-8")))
    args.output.write_text(dumps(manifest), encoding="utf-8")
    print(f"wrote {sum(len(d['files']) for d in manifest['datasets'].values())} file entries to {args.output}")
