"""The papers' published numbers (lm_eval_ext.published): every number derived from a released file is
recomputed here independently, and checked against hand counts and the papers' printed values.

Hand counts (LIEDER) were made on the released CSVs with one-line awk sums, e.g. for gpt2's direct
metric on the base set, the informative rows (every comparison but the two controls):
``awk -F, 'NR>1 && $3!="neg_pos_s>pos_neg_s" && $3!="neg_pos_p>pos_neg_p" {n++; c+=$4} END {print c, n}'
results/base/base_gpt2_accuracy_ref.csv`` -> 551 720.
"""
from __future__ import annotations

import csv
import json
import math
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("published_numbers")  # one worker loads `published`

# The paper's 15 informative comparisons and the properties each tests (Zhu & Frank 2024, typed from the
# paper's comparison table), and the two controls.
LIEDER_INFORMATIVE = {
    "pos_neg_s>pos_pos_s": ("uniqueness", "novelty"), "neg_pos_s>pos_pos_s": ("uniqueness", "novelty"),
    "neg_pos_s>neg_neg_s": ("existence",), "pos_neg_s>neg_neg_s": ("existence",),
    "pos_pos_p>pos_neg_p": ("plurality",), "pos_pos_p>neg_pos_p": ("plurality",),
    "pos_pos_p>neg_neg_p": ("existence", "plurality"), "pos_neg_s>pos_neg_p": ("plurality",),
    "pos_neg_s>neg_pos_p": ("plurality",), "pos_neg_s>neg_neg_p": ("existence", "plurality"),
    "neg_pos_s>neg_pos_p": ("plurality",), "neg_pos_s>pos_neg_p": ("plurality",),
    "neg_pos_s>neg_neg_p": ("existence", "plurality"), "pos_pos_p>pos_pos_s": ("uniqueness", "novelty"),
    "pos_pos_p>neg_neg_s": ("existence",),
}
LIEDER_CONTROLS = ("neg_pos_s>pos_neg_s", "neg_pos_p>pos_neg_p")
LIEDER_MODELS = ("babbage-002", "codellama_7B", "davinci-002", "gpt2", "llama2_7B", "llama2_13B", "llama2_70B", "llama3_8B",
                 "llama3_70B", "llama_7B")


@pytest.fixture(scope="module")
def published(data_dir):
    from lm_eval_ext.published import load_published

    numbers = load_published()
    assert numbers.missing == []
    return numbers


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _name(code: str) -> str:
    """The task's metric fragment of an authors' comparison code (pos_neg_s>pos_pos_s -> sg_pos_neg_gt_sg_pos_pos)."""
    kinds = {"s": "sg", "p": "pl"}
    left, right = (side.rsplit("_", 1) for side in code.split(">"))
    return f"{kinds[left[1]]}_{left[0]}_gt_{kinds[right[1]]}_{right[0]}"


def test_lieder_hand_counts(published):
    value = published.value
    assert math.isclose(value("gpt2", "lieder_base", "acc"), 551 / 720)
    assert math.isclose(value("gpt2", "lieder_base", "acc_rel"), 521 / 720)
    assert math.isclose(value("llama3_70B", "lieder_diff", "acc"), 630 / 720)
    assert math.isclose(value("gpt2", "lieder_two", "acc"), 1010 / 1488)  # 31 informative comparisons x 48 groups
    assert math.isclose(value("gpt2", "lieder_base", "acc_sg_pos_neg_gt_sg_pos_pos"), 26 / 48)
    assert math.isclose(value("gpt2", "lieder_base", "acc_novelty"), 78 / 144)
    assert math.isclose(value("gpt2", "lieder_base", "acc_family_know_doubt"), 181 / 240)
    assert value("gpt2", "lieder_two", "acc_rel") is None  # the two set has no nonref table


def test_lieder_every_number_recomputed_from_the_released_tables(published, data_dir):
    """Every model, experiment and metric (direct and relative) of the base and diff sets, recomputed from the CSVs
    with the paper's comparison table: mean over informative rows (controls excluded), per property, per
    comparison (controls as ctrl_), per family."""
    assert published.for_benchmark("lieder").models() == [*LIEDER_MODELS, "Human participants"]
    checked = 0
    for model in LIEDER_MODELS:
        for experiment in ("base", "diff"):
            for suffix, prefix in (("ref", "acc"), ("nonref", "acc_rel")):
                rows = _rows(Path(data_dir) / "lieder" / "results" / experiment / f"{experiment}_{model}_accuracy_{suffix}.csv")
                assert len(rows) == 48 * 17
                informative = [r for r in rows if r["type"] in LIEDER_INFORMATIVE]
                expected = {prefix: sum(int(r["correct"]) for r in informative) / len(informative)}
                for prop in ("existence", "uniqueness", "plurality", "novelty"):
                    tagged = [int(r["correct"]) for r in informative if prop in LIEDER_INFORMATIVE[r["type"]]]
                    expected[f"{prefix}_{prop}"] = sum(tagged) / len(tagged)
                by_code = defaultdict(list)
                by_family = defaultdict(list)
                for r in rows:
                    by_code[r["type"]].append(int(r["correct"]))
                    if r["type"] in LIEDER_INFORMATIVE:
                        by_family[r["sent_type"]].append(int(r["correct"]))
                for code, outcomes in by_code.items():
                    control = "ctrl_" if code in LIEDER_CONTROLS else ""
                    expected[f"{control}{prefix}_{_name(code)}"] = sum(outcomes) / len(outcomes)
                for family, outcomes in by_family.items():
                    expected[f"{prefix}_family_{family}"] = sum(outcomes) / len(outcomes)
                task = f"lieder_{experiment}"
                for metric, value in expected.items():
                    number = published.get(model, task, metric)
                    assert number is not None and math.isclose(number.value, value), (model, task, metric)
                    checked += 1
                assert number.source.locator == f"results/{experiment}/{experiment}_{model}_accuracy_{suffix}.csv"
                assert number.source.url.endswith(f"/LIEDER/ab5f161feb0b15fd94dbd68e52497ccc033b52b6/{number.source.locator}")
    assert checked == 10 * 2 * 2 * (1 + 4 + 17 + 3)


def test_lieder_human_baseline(published, data_dir):
    rows = _rows(Path(data_dir) / "lieder" / "human" / "human_accuracy.csv")
    informative = [int(r["correct"]) for r in rows if r["type"] in LIEDER_INFORMATIVE]
    number = published.get("Human participants", "lieder_base", "acc")
    assert math.isclose(number.value, sum(informative) / len(informative)) and len(informative) == 15 * 32
    assert number.source.locator == "human/human_accuracy.csv" and "two of the three sentence families" in number.note


# Liu et al. (TACL 2024), typed from the paper: Table 1, and Table 6 (20 documents) for two models
LITM_TABLE1 = {"LongChat-13B (16K)": (35.0, 83.4), "MPT-30B-Instruct": (31.5, 81.9), "GPT-3.5-Turbo": (56.1, 88.3),
               "GPT-3.5-Turbo (16K)": (56.0, 88.6), "Claude-1.3": (48.3, 76.1), "Claude-1.3 (100K)": (48.2, 76.4)}
LITM_20DOCS = {"GPT-3.5-Turbo": (75.8, 57.2, 53.8, 55.4, 63.2), "LongChat-13B (16K)": (68.6, 57.4, 55.3, 52.5, 55.0)}


def test_litm_transcription_and_derived_values(published):
    litm = published.for_benchmark("lost_in_the_middle")
    for model, (closed, oracle) in LITM_TABLE1.items():
        assert math.isclose(litm.value(model, "litm_qa_closedbook", "acc"), closed / 100)
        assert math.isclose(litm.value(model, "litm_qa_oracle", "acc"), oracle / 100)
        assert litm.get(model, "litm_qa_oracle", "acc").source.text() == "Liu et al. (TACL 2024), Table 1"
    for model, row in LITM_20DOCS.items():
        values = [litm.value(model, "litm_qa_20docs", f"acc_pos_{p}") for p in (1, 5, 10, 15, 20)]
        assert all(math.isclose(value, printed / 100) for value, printed in zip(values, row, strict=True))
        # the README's worked example: GPT-3.5-Turbo's gap 22.0 points, middle drop 15.7 points
        assert math.isclose(litm.value(model, "litm_qa_20docs", "acc_gap"), (max(row) - min(row)) / 100)
        assert math.isclose(litm.value(model, "litm_qa_20docs", "acc_middle_drop"),
                            ((row[0] + row[-1]) / 2 - min(row[1:-1])) / 100)
        assert math.isclose(litm.value(model, "litm_qa_20docs", "acc"), sum(row) / 5 / 100)
    assert math.isclose(litm.value("GPT-3.5-Turbo", "litm_qa_20docs", "acc_gap"), 0.22)
    assert math.isclose(litm.value("GPT-3.5-Turbo", "litm_qa_20docs", "acc_middle_drop"), 0.157)
    # GPT-3.5-Turbo's 4K window does not hold 30 documents: no row there
    assert litm.value("GPT-3.5-Turbo", "litm_qa_30docs", "acc_pos_1") is None
    assert math.isclose(litm.value("GPT-3.5-Turbo (16K)", "litm_qa_30docs", "acc_pos_30"), 0.637)
    # 12 (Table 1) + 6 x 3 + 6 x 5 + 5 x 7 transcribed, 3 derived per model and number of documents
    assert len(litm.numbers) == 95 + 3 * 17


def test_magnifico_table3(published):
    magnifico = published.for_benchmark("magnifico")
    expected = {  # Patel et al. (EMNLP 2023), Table 3
        ("StarCoder", "magnifico_description_plausible"): 79.40, ("StarCoder", "magnifico_description_foreign"): 80.74,
        ("StarCoder", "magnifico_dialogue_start_plausible"): 68.91, ("StarCoder", "magnifico_dialogue_start_foreign"): 80.55,
        ("GPT-3.5-Turbo", "magnifico_description_plausible"): 91.46,
        ("GPT-3.5-Turbo", "magnifico_description_foreign"): 85.95,
        ("GPT-3.5-Turbo", "magnifico_dialogue_start_plausible"): 84.87,
        ("GPT-3.5-Turbo", "magnifico_dialogue_start_foreign"): 87.63,
    }
    assert {(n.model, n.task): n.value for n in magnifico.numbers} == expected
    assert all(n.metric == "rel_perf" and n.source.text() == "Patel et al. (EMNLP 2023), Table 3" for n in magnifico.numbers)
    assert all(n.note == "over the 8 interpretations that have dialogues" for n in magnifico.numbers
               if "description" in n.task)


# the per-model means of the published GPT-4 scores, as tasks/elitr_bench/README.md lists them (dev)
ELITR_DEV = {"GPT-3.5": (7.04, None, None), "GPT-4": (8.21, 8.52, 8.52), "LongAlpaca-7B": (5.89, 4.53, 4.70),
             "LongAlpaca-13B": (6.17, 4.76, 4.74), "LongChat-7B-v1.5": (6.60, 5.85, 5.21), "Vicuna-7B-v1.5": (5.42, 4.68, 4.67),
             "Vicuna-13B-v1.5": (5.91, 5.52, 5.42), "LongAlign-7B": (6.11, 5.43, 5.04), "LongAlign-13B": (6.27, 4.65, 4.81)}


def test_elitr_recomputed_from_the_released_answers(published, data_dir):
    elitr = published.for_benchmark("elitr_bench")
    archive = Path(data_dir) / "elitr_bench" / "generated-responses.zip"
    with zipfile.ZipFile(archive) as zf:
        for setting in ("qa_dev_st", "qa_dev_mt", "conv_dev_mt", "qa_test2_st", "qa_test2_mt", "conv_test2_mt"):
            data = json.loads(zf.read(f"generated-responses/elitr-bench-{setting}_gpt-4-eval.json", pwd=b"utter"))
            scores, by_type = defaultdict(list), defaultdict(list)
            for meeting in data["meetings"]:
                for question in meeting["questions"]:
                    for answer in question["generated-responses"]:
                        score = float(answer["gpt-4-eval_score"])
                        scores[answer["model"]].append(score)
                        by_type[(answer["model"], question["question-type"])].append(score)
            task = f"elitr_bench_{setting}"
            assert elitr.models(task) == list(scores)
            for model, values in scores.items():
                assert math.isclose(elitr.value(model, task, "score"), sum(values) / len(values)), (task, model)
                for q_type in ("who", "what", "when", "howmany"):
                    typed = by_type[(model, q_type)]
                    assert math.isclose(elitr.value(model, task, f"score_{q_type}"), sum(typed) / len(typed))
    for model, row in ELITR_DEV.items():
        for setting, printed in zip(("qa_dev_st", "qa_dev_mt", "conv_dev_mt"), row):
            value = elitr.value(model, f"elitr_bench_{setting}", "score")
            assert (value is None) if printed is None else round(value, 2) == printed, (model, setting)
    number = elitr.get("GPT-4", "elitr_bench_qa_test2_st", "score")
    assert number.source.locator == ("generated-responses.zip:generated-responses/elitr-bench-qa_test2_st_gpt-4-eval.json "
                                     "(gpt-4-eval_score)")
    assert "means over three seeds" in number.note


def test_a_missing_source_is_a_sentence_not_a_failure(tmp_path, monkeypatch):
    from lm_eval_ext.published import load_published

    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(tmp_path / "no-mirror"))
    monkeypatch.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path / "no-cache"))
    monkeypatch.setenv("LM_EVAL_EXT_OFFLINE", "1")
    numbers = load_published(["lieder", "magnifico"])
    assert [n.benchmark for n in numbers.numbers] == ["magnifico"] * 8  # shipped with the package
    (missing,) = numbers.missing
    assert missing.startswith("LIEDER: the published results are not shown, because their released files could not "
                              "be read: ")
