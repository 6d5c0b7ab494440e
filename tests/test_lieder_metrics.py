"""LIEDER metrics through the real harness with a scripted log-likelihood model.

The log-probabilities are chosen per sentence family so that every comparison's
outcome is known by hand (see the schemes below); the expected numbers are worked out
in the comments, not recomputed with the plugin's code.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from helpers.harness import assert_documents

pytestmark = pytest.mark.filterwarnings("ignore")

FAMILY_WORD = {"affirmative": "A", "negation": "A", "know": "B", "doubt": "B", "managed": "C", "failed": "C"}
# Scheme A (affirmative/negation): felicitous -10, infelicitous -20, nonref -15.
#   Every informative comparison is felicitous > infelicitous: 15/15 (31/31 for `two`).
#   Both controls compare equal values (two felicitous sg, two infelicitous pl): ties, wrong.
# Scheme B (know/doubt): everything -10: every comparison is a tie, so wrong.
# Scheme C (managed/failed): sg -10, pl -20; nonref by context: pos_neg -10, neg_pos -20,
#   pos_pos -30, neg_neg -40.
#   direct: only "sg > pl" comparisons win: #8-#13 of the table = 6/15; existence 2/6
#   (#10, #13), uniqueness 0/3, novelty 0/3, plurality 6/9; the 16 `two` extras are
#   sg>sg, pl>pl (ties) or pl>sg: 0/16.
#   relative, log-odds sg: pos_neg 0, neg_pos 10, pos_pos 20, neg_neg 30;
#   pl: pos_neg -10, neg_pos 0, pos_pos 10, neg_neg 20 -> wins #5, #6, #8, #11, #12
#   (#9 is a tie 0 vs 0) = 5/15; existence 0/6, uniqueness 0/3, plurality 5/9;
#   both controls win (10 > 0, 0 > -10).
NONREF_C = {"pos_neg": -10.0, "neg_pos": -20.0, "pos_pos": -30.0, "neg_neg": -40.0}
CLAUSE = {"affirmative": "pos", "know": "pos", "managed": "pos", "negation": "neg", "doubt": "neg", "failed": "neg", "two": "two"}


def scripted_logprob(record: dict) -> float:
    _, _, first, second, cont = record["id"].split("_")
    scheme = FAMILY_WORD[first if first != "two" else second]
    if scheme == "A":
        return {1: -10.0, 0: -20.0, -1: -15.0}[record["expected"]]
    if scheme == "B":
        return -10.0
    if cont == "nonref":
        return NONREF_C[f"{CLAUSE[first]}_{CLAUSE[second]}"]
    return -10.0 if cont == "sref" else -20.0


def write_table(data_dir: Path, stimulus_set: str, out: Path) -> Path:
    entries = []
    for line in (data_dir / "lieder" / "stimuli" / stimulus_set / f"{stimulus_set}_stimuli.jsonl").read_text().splitlines():
        record = json.loads(line)
        # As in the authors' analysis (Zhu & Frank, ACL 2024): context = everything up to the final sentence, scored as " " + continuation.
        context, continuation = record["sent"].rsplit(". ", 1)
        entries.append({"context": context + ".", "continuation": " " + continuation, "logprob": scripted_logprob(record)})
    out.write_text(json.dumps({"entries": entries, "default": None}))
    return out


def evaluate(table: Path, tasks: list[str]) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    from lm_eval_ext.results.load import by_task_name  # a group's tasks as lm-eval 0.4 names them
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    return by_task_name(lm_eval.simple_evaluate(
        model="ext-loglik-table", model_args=f"table={table}", tasks=tasks, task_manager=manager, log_samples=True
    ))[0]


def metrics(results: dict, task: str) -> dict:
    return {key.split(",")[0]: value for key, value in results["results"][task].items() if key.endswith(",none")}


# mean over the three families of each scheme's per-group value (16 groups each)
EXPECTED_BASE = {
    "acc": (1 + 0 + 6 / 15) / 3,
    "acc_existence": (1 + 0 + 2 / 6) / 3,
    "acc_uniqueness": 1 / 3,
    "acc_novelty": 1 / 3,
    "acc_plurality": (1 + 0 + 6 / 9) / 3,
    "acc_family_affirmative_negation": 1.0,
    "acc_family_know_doubt": 0.0,
    "acc_family_managed_failed": 6 / 15,
    "acc_sg_pos_neg_gt_sg_pos_pos": 1 / 3,
    "acc_sg_pos_neg_gt_pl_pos_neg": 2 / 3,
    "ctrl_acc_sg_neg_pos_gt_sg_pos_neg": 0.0,
    "ctrl_acc_pl_neg_pos_gt_pl_pos_neg": 0.0,
    "acc_rel": (1 + 0 + 5 / 15) / 3,
    "acc_rel_existence": 1 / 3,
    "acc_rel_uniqueness": 1 / 3,
    "acc_rel_novelty": 1 / 3,
    "acc_rel_plurality": (1 + 0 + 5 / 9) / 3,
    "acc_rel_family_managed_failed": 5 / 15,
    "acc_rel_sg_pos_neg_gt_pl_neg_pos": 1 / 3,
    "acc_rel_pl_pos_pos_gt_pl_neg_pos": 2 / 3,
    "ctrl_acc_rel_sg_neg_pos_gt_sg_pos_neg": 1 / 3,
    "ctrl_acc_rel_pl_neg_pos_gt_pl_pos_neg": 1 / 3,
}

EXPECTED_TWO = {
    "acc": (1 + 0 + 6 / 31) / 3,
    "acc_existence": (1 + 0 + 2 / 6) / 3,
    "acc_uniqueness": 1 / 3,  # C: 0/3 base + 0/10 extra
    "acc_novelty": 1 / 3,
    "acc_plurality": (1 + 0 + 6 / 13) / 3,  # C: 6/9 base + 0/4 extra
    "acc_family_managed_failed": 6 / 31,
    "acc_sg_pos_neg_gt_sg_two_neg": 1 / 3,
    "acc_pl_two_neg_gt_sg_pos_pos": 1 / 3,
    "ctrl_acc_sg_neg_pos_gt_sg_pos_neg": 0.0,
}


def _check(got: dict, expected: dict) -> None:
    for name, value in expected.items():
        assert name in got, f"metric {name} missing; have {sorted(got)[:10]}..."
        assert math.isclose(got[name], value, abs_tol=1e-12), f"{name}: got {got[name]}, expected {value}"


@pytest.mark.parametrize("stimulus_set", ["base", "diff"])
def test_base_and_diff_exact_scores(data_dir, tmp_path, stimulus_set):
    table = write_table(Path(data_dir), stimulus_set, tmp_path / "table.json")
    results = evaluate(table, [f"lieder_{stimulus_set}"])
    got = metrics(results, f"lieder_{stimulus_set}")
    _check(got, EXPECTED_BASE)
    # 15 informative + 2 controls per comparison family, 4 properties, 3 families: x2 with rel
    assert len([m for m in got if not m.endswith("_stderr")]) == 2 * (1 + 4 + 3 + 17)
    assert_documents(results, f"lieder_{stimulus_set}", 48)


def test_two_exact_scores(data_dir, tmp_path):
    table = write_table(Path(data_dir), "two", tmp_path / "table.json")
    got = metrics(evaluate(table, ["lieder_two"]), "lieder_two")
    _check(got, EXPECTED_TWO)
    assert not any(name.startswith("acc_rel") for name in got), "`two` has no nonref rows"
    per_comparison = [m for m in got if "_gt_" in m and not m.endswith("_stderr")]
    assert len(per_comparison) == 33


def test_group_and_sample_logs(data_dir, tmp_path):
    table = tmp_path / "table.json"
    tables = [json.loads(write_table(Path(data_dir), s, tmp_path / f"{s}.json").read_text()) for s in ("base", "diff")]
    table.write_text(json.dumps({"entries": tables[0]["entries"] + tables[1]["entries"], "default": None}))
    results = evaluate(table, ["lieder"])
    group = {k.split(",")[0]: v for k, v in results["groups"]["lieder"].items() if k.endswith(",none")}
    assert math.isclose(group["acc"], EXPECTED_BASE["acc"], abs_tol=1e-12)
    assert math.isclose(group["acc_rel_plurality"], EXPECTED_BASE["acc_rel_plurality"], abs_tol=1e-12)

    sample = results["samples"]["lieder_base"][0]
    doc = sample["doc"]
    assert (doc["noun"], doc["family"]) == ("dog", "affirmative_negation")
    assert len(doc["rows"]) == len(sample["resps"]) == 12
    # every row's log-probability, aligned with the row it scores
    for row, args, resp in zip(doc["rows"], sample["arguments"], sample["resps"]):
        assert args == (row["context"], " " + row["continuation"]) or list(args) == [row["context"], " " + row["continuation"]]
        assert resp[0][0] == {1: -10.0, 0: -20.0, -1: -15.0}[row["expected"]]
    # every comparison's outcome
    assert sample["acc_sg_pos_neg_gt_sg_pos_pos"] == 1.0
    assert sample["ctrl_acc_sg_neg_pos_gt_sg_pos_neg"] == 0.0


def test_a_misspelled_option_is_an_error(data_dir):
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.errors import UserError
    from lm_eval_ext.paths import tasks_dir
    # "stimulus_file" ignored would score the published stimuli instead of the user's
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"stimulus_file": "mine.jsonl"})
    with pytest.raises(UserError, match=re.escape("lieder_base: --metadata 'stimulus_file' is no LIEDER option; did "
                                                  "you mean 'stimuli_file'? The options are stimuli_file.")):
        manager.load(["lieder_base"])
