"""Maintainer tool: regenerate manifest.json (the registry) from a data mirror.

Usage: ``python -m lm_eval_ext.data.manifest MIRROR_DIR``

It hashes every data file of the mirror (whose layout is the registry's) and
adds the files the mirror lacks (Lost in the Middle multi-document QA and
kv-300, with sizes and sha256 from lost_in_the_middle/FORMAT.md). Users never
run it; the generated manifest.json ships inside the package.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pooch import file_hash

from .registry import DATASETS, MANIFEST_PATH

GH = "https://raw.githubusercontent.com/"
MAGNIFICO = GH + "McGill-NLP/MAGNIFICo/32b4a7ceeb84ca4f22e43d4fc3b8a9426a7a3a5e/"
URL_BASES = {
    "lieder": GH + "xiaomeng-zhu/LIEDER/ab5f161feb0b15fd94dbd68e52497ccc033b52b6/",
    "lost_in_the_middle": GH + "nelson-liu/lost-in-the-middle/29b8a6d042ce29abccee3db1a73171a107d7e6af/",
    "magnifico": MAGNIFICO,
    "spider": MAGNIFICO + "spider/",
    "elitr_bench": GH + "utter-project/ELITR-Bench/83649521b016e78b6293ceaf2585ea96f2ed9162/",
}
ELITR_CORPUS_URL = (
    "https://lindat.mff.cuni.cz/repository/xmlui/bitstream/handle/11234/1-4692/ELITR-minuting-corpus.zip"
)
ELITR_CORPUS_DIR = "ELITR-minuting-corpus/"
LITM_PARTIAL_DIR = "partial_first_release_2023/ViktorTorp+lost-in-the-middle/"
LITM_PARTIAL_URL = GH + "ViktorTorp/lost-in-the-middle/a7a9725db6c3831f3c13be022022887b96fa6945/"
INTERPRETATIONS_NOTE = (
    "magnifico/interpretations.json has no canonical download URL: it restates, as data, the mappings in "
    "McGill-NLP/MAGNIFICo's mappings.py and exists only in the lm-eval-ext data mirror"
)

# Files absent from the mirror: (path, size, sha256), from the checksum table of
# lost_in_the_middle/FORMAT.md (nelson-liu/lost-in-the-middle@29b8a6d).
_LITM_QA = "qa_data/{k}_total_documents/nq-open-{k}_total_documents_gold_at_{i}.jsonl.gz"
LITM_MISSING = [
    (_LITM_QA.format(k=10, i=0), 7801797, "192a05b27af2b09eec33ca0c94bb5cf82bcaf70d78b3bdff1258df34bf37aab9"),
    (_LITM_QA.format(k=10, i=4), 7806238, "f8425253dafc19cd9de31c06ab6c8b57d4da2bf48b8ea2d0790b805fb3aa1968"),
    (_LITM_QA.format(k=10, i=9), 7774527, "fab97badc6d69bae53c805bb198e8742a78ddf3c40a076989ef62891b76c997f"),
    (_LITM_QA.format(k=20, i=0), 15151873, "69a8dd87a45f07fb3ed9b804917a89db975cd6e488682fc838edca029cc3881f"),
    (_LITM_QA.format(k=20, i=4), 15163003, "c5e44700c4db24536f139f7383e3dd002413515ee889aeadc72767dd7f289682"),
    (_LITM_QA.format(k=20, i=9), 15155756, "cbada411f70235afc47d9b5407e9358ad72eb021742402ff032c8b65076ffb2f"),
    (_LITM_QA.format(k=20, i=14), 15152418, "86c1a25093615baefdd1ee4db7a993548b3bef24ca02eb9bd8db43fbedf517f2"),
    (_LITM_QA.format(k=20, i=19), 15114700, "d79b715e1b8c8301335e93cb01659f68c24f0253a808c3190b06d21896506c6c"),
    (_LITM_QA.format(k=30, i=0), 22465103, "0500933e0957ee264a8bf57ca4cd58042124f222c814302dbe2e3af788ff4e95"),
    (_LITM_QA.format(k=30, i=4), 22477142, "3cfc86ec1056d15d32c3e0ae115bf55c1c7e14fa6bea53e1a3d57af18329cb56"),
    (_LITM_QA.format(k=30, i=9), 22475002, "6da79584eac95b3d388fe6702f7c4ac32c50f8431865ec591c8af3de485128e2"),
    (_LITM_QA.format(k=30, i=14), 22472929, "14ec97b971d111e381b8ad6a3c14eb87f6bff83401678afcdc32ec4afed9aeb7"),
    (_LITM_QA.format(k=30, i=19), 22464022, "aef115bb3855b6d8ece2f6f1222cd3470bbeedd3f7c52bd106979810d09940e0"),
    (_LITM_QA.format(k=30, i=24), 22459904, "bf9307930a0ed7fe151012d5619c4978c1dc13bf51f70481242839704d9ac477"),
    (_LITM_QA.format(k=30, i=29), 22419963, "e768fcd157c321e0423432decb8623f537e2a97e2dd570873261f1acb6e2dfc6"),
    ("kv_retrieval_data/kv-retrieval-300_keys.jsonl.gz", 6641428,
     "47c795feb8ee5e47e7a151f866babfca968c786818fed3d7caa5ee6e9fedc70a"),
]


def _is_data_file(dataset: str, rel: str) -> bool:
    # The mirror's .md files document it; spider/database/ has no stable URL and
    # is reached through spider_database_dir() instead.
    return not rel.endswith(".md") and not (dataset == "spider" and rel.startswith("database/"))


def _entry(dataset: str, rel: str, sha256: str, size: int) -> dict:
    entry: dict = {"path": rel, "sha256": sha256, "size": size}
    if dataset == "lost_in_the_middle" and rel.startswith(LITM_PARTIAL_DIR):
        entry["url"] = LITM_PARTIAL_URL + rel[len(LITM_PARTIAL_DIR):]
    elif dataset == "magnifico" and rel == "interpretations.json":
        entry.update(url=None, note=INTERPRETATIONS_NOTE)
    elif dataset == "elitr_bench" and rel.startswith(ELITR_CORPUS_DIR):
        entry.update(url=None, archive={"url": ELITR_CORPUS_URL, "member": rel[len(ELITR_CORPUS_DIR):]})
    return entry


def build(mirror: Path) -> dict:
    """The manifest as a dict, from the mirror's files plus the known missing ones."""
    datasets = {}
    for name in DATASETS:
        root = mirror / name
        if not root.is_dir():
            raise SystemExit(f"{root} is missing: MIRROR_DIR must hold the folders {', '.join(DATASETS)}")
        entries = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if _is_data_file(name, rel):
                entries[rel] = _entry(name, rel, file_hash(str(path)), path.stat().st_size)
        if name == "lost_in_the_middle":
            for rel, size, sha256 in LITM_MISSING:
                entries.setdefault(rel, _entry(name, rel, sha256, size))
        datasets[name] = {"url_base": URL_BASES[name], "files": [entries[k] for k in sorted(entries)]}
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
    """Regenerate manifest.json from MIRROR_DIR (or write it to --output)."""
    parser = argparse.ArgumentParser(prog="python -m lm_eval_ext.data.manifest", description=__doc__.split("\n")[0])
    parser.add_argument("mirror", type=Path, help="mirror directory (layout of the shared data folder)")
    parser.add_argument("--output", type=Path, default=MANIFEST_PATH, help="where to write (default: the packaged manifest)")
    args = parser.parse_args(argv)
    manifest = build(args.mirror)
    args.output.write_text(dumps(manifest), encoding="utf-8")
    count = sum(len(d["files"]) for d in manifest["datasets"].values())
    print(f"wrote {count} file entries to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
