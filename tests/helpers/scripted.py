"""Result directories written by the real harness for the report, export and leaderboard tests.

Each builder runs ``lm-eval-ext run ... --output_path DIR --log_samples`` (scripted models whose
outputs are chosen so that the expected numbers are known by hand, and the tiny random hf model)
and returns DIR; tests/conftest.py makes each one a session fixture. The comments derive the
expected numbers.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from .files import harness

# -- LIEDER with a scripted log-likelihood table ----------------------------------------
#
# Per row: felicitous -10, infelicitous -20, non-referring -15 (-30 in neg_neg contexts),
# except in "flipped" groups, where the pos_pos rows get sg -10, pl -20 (as if a singular
# definite were felicitous there). Base: know/doubt groups normal, affirmative/negation and
# managed/failed flipped. Diff: affirmative/negation normal, know/doubt items 1-4 normal,
# know/doubt items 5-16 flipped, managed/failed flipped. The two set: shared (context,
# continuation) pairs keep the base values, the others get the table default -10.
#
# Direct metric, one group (15 informative comparisons, 7 of them with a pos_pos side):
#   normal: 15/15. flipped: the 7 pos_pos comparisons are ties (-10 vs -10, -20 vs -20) or
#   lost (pl -20 vs sg -10): 8/15.
#   base: 16 normal, 32 flipped -> acc = (16*15 + 32*8) / 720 = 496/720.
#   diff: 20 normal, 28 flipped -> acc = (20*15 + 28*8) / 720 = 524/720.
#   existence (#3 #4 #7 #10 #13 #15; #7 #15 have pos_pos): normal 6/6, flipped 4/6
#     -> base (16 + 32*4/6) / 48 = 7/9. uniqueness = novelty (#1 #2 #14, all pos_pos): base 16/48 = 1/3.
#   plurality (#5-#13, pos_pos in #5 #6 #7): flipped 6/9 -> base (16 + 32*6/9)/48 = 7/9.
#   acc_sg_pos_neg_gt_sg_pos_pos: right only in normal groups: base 1/3; diff 20/48.
#   The two controls compare -10 with -10 and -20 with -20: 0.
#   On the human baseline's families (affirmative/negation, managed/failed): base: all
#   flipped, acc 8/15, acc_sg_pos_neg_gt_sg_pos_pos 0; diff: (1 + 8/15) / 2 = 23/30.
# Relative metric, log-odds = logprob - nonref: normal group pos_neg/neg_pos sg 5, pl -5;
#   pos_pos sg -5, pl 5; neg_neg sg 10, pl 10 -> the 6 existence comparisons (right side
#   neg_neg, 10) are lost: 9/15. Flipped: pos_pos sg 5, pl -5 -> #1 #2 #5 #6 #14 lost too:
#   4/15. base acc_rel = (16*9 + 32*4) / 720 = 272/720.
# Novelty test, direct metric, per group over the 7 pos_pos comparisons (normal 1, flipped 0)
#   and for each of them alone: up = affirmative/negation (16 groups), down = know/doubt
#   items 5-16 (12), ties = know/doubt 1-4 and managed/failed (20). p(diff > base) =
#   P(Bin(28, 1/2) >= 16); two-sided = twice that.
#   Relative metric, #7 and #15 are lost in every group: 48 ties, p = 1.

FAMILY = {"affirmative": "affirmative_negation", "negation": "affirmative_negation", "know": "know_doubt",
          "doubt": "know_doubt", "managed": "managed_failed", "failed": "managed_failed"}
POSITIVE = {"affirmative", "know", "managed"}


def _flipped(stimulus_set: str, item: int, family: str) -> bool:
    if stimulus_set == "diff":
        return family == "managed_failed" or (family == "know_doubt" and item > 4)
    return family != "know_doubt"


def _lieder_logprob(stimulus_set: str, record: dict) -> float:
    item, _, first, second, cont = record["id"].split("_")
    family = FAMILY[first if first != "two" else second]
    context = "_".join("two" if w == "two" else ("pos" if w in POSITIVE else "neg") for w in (first, second))
    if cont == "nonref":
        return -30.0 if context == "neg_neg" else -15.0
    if context == "pos_pos" and _flipped(stimulus_set, int(item), family):
        return -10.0 if cont == "sref" else -20.0
    return -10.0 if record["expected"] == 1 else -20.0


def write_lieder_table(data_dir: Path, path: Path) -> Path:
    entries = {}
    for stimulus_set in ("base", "diff"):
        for line in (data_dir / "lieder" / "stimuli" / stimulus_set / f"{stimulus_set}_stimuli.jsonl").read_text().splitlines():
            record = json.loads(line)
            context, continuation = record["sent"].rsplit(". ", 1)
            key = (context + ".", " " + continuation)
            value = _lieder_logprob(stimulus_set, record)
            assert entries.setdefault(key, value) == value, f"base and diff disagree on {key}"
    rows = [{"context": c, "continuation": k, "logprob": v} for (c, k), v in entries.items()]
    path.write_text(json.dumps({"entries": rows, "default": -10.0}))
    return path


def lieder_scripted(tmp: Path, data_dir: Path) -> Path:
    """lieder (base + diff) and lieder_two with the scripted table above."""
    table = write_lieder_table(Path(data_dir), tmp / "table.json")
    return harness(tmp / "out", "ext-loglik-table", f"table={table}", "lieder,lieder_two")


def lieder_tiny(tmp: Path, tiny_model_dir: Path) -> Path:
    """lieder (base + diff) with the tiny random hf model; what the command printed is in ``stdout.txt`` beside the
    directory returned."""
    return harness(tmp / "out", "hf", f"pretrained={tiny_model_dir},dtype=float32", "lieder",
                   "--batch_size", "32", "--device", "cpu", stdout=tmp / "stdout.txt")


# -- Lost in the Middle with canned generations -----------------------------------------------
#
# One responses file for four runs of the same scripted model (so they are one model):
#   qa:   closed-book, oracle, 10 docs, 10 docs query-aware, 20 docs, on the first 2 questions
#         of the partial 20-document file (--metadata litm_qa_file). The answer is given when
#         the prompt has the gold passage as "Document [1]" (both questions) or "Document [10]"
#         (question 0 only); otherwise "no idea".
#         closed-book 0; oracle 1 (its only document is the gold one, numbered 1).
#         10 docs (positions 1, 5, 10): pos 1 = 1, pos 5 = 0, pos 10 = 1/2 -> acc 3/6,
#           gap 1, middle drop (1 + 1/2)/2 - 0 = 3/4 (same for query-aware).
#         20 docs (1, 5, 10, 15, 20): pos 1 = 1, pos 10 = 1/2, others 0 -> acc 3/10, gap 1,
#           middle drop (1 + 0)/2 - 0 = 1/2.
#   kv75: the published 75-pair file, --limit 8 = 2 examples x positions 1, 25, 50, 75. The
#         value is given when the queried pair opens the object ('{"KEY": "VALUE"', both
#         examples) or closes it ('"KEY": "VALUE"}', example 0 only): pos 1 = 1, 25 = 0, 50 = 0,
#         75 = 1/2 -> acc 3/8, gap 1, middle drop 3/4.
#   kv4:  litm_kv_generated on our own 4-pair file (2 examples), every position: first and last
#         right for both -> 1, 0, 0, 1; acc 1/2, gap 1, middle drop 1.
#   kv8:  the same with 8 pairs; example 1 has 4000-character keys and does not fit
#         max_length=3000 (tiny tokenizer): skipped at all 8 positions (1 per position, 8 in
#         all); example 0 -> pos 1 = pos 8 = 1, others 0; acc 2/8.
# kv75, kv4 and the qa run name no context length: their lengths are not checked.

QA_FILE = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/"
           "20_total_documents/gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")


def _gz_records(path: Path, n: int) -> list[dict]:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(n), handle)]


def _kv_file(path: Path, pairs: int, long_keys_in: tuple[int, ...] = ()) -> list[dict]:
    records = []
    for n in range(2):
        width = 4000 if n in long_keys_in else 0
        kv = [[f"{n:04x}{j:04x}-key-{'k' * width}", f"{n:04x}{j:04x}-value"] for j in range(pairs)]
        records.append({"ordered_kv_records": kv, "key": kv[1][0], "value": kv[1][1]})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def _first_last_rules(record: dict, last: bool = True) -> list[dict]:
    key, value = record["key"], record["value"]
    rules = [{"contains": f'{{"{key}": "{value}"', "response": value}]
    return rules + ([{"contains": f'"{key}": "{value}"}}', "response": value}] if last else [])


def litm_scripted(tmp: Path, data_dir: Path, tiny_model_dir: Path) -> Path:
    """Four runs of one scripted model (see above); returns their common parent directory."""
    questions = _gz_records(Path(data_dir) / QA_FILE, 2)
    qa_file = tmp / "qa.jsonl"
    qa_file.write_text("".join(json.dumps(q) + "\n" for q in questions))
    rules = []
    for n, q in enumerate(questions):
        gold = next(c for c in q["ctxs"] if c["isgold"])
        for number in (1, 10) if n == 0 else (1,):
            rules.append({"contains": f"Document [{number}](Title: {gold['title']}) {gold['text'][:60]}",
                          "response": q["answers"][0]})
    kv75 = _gz_records(Path(data_dir) / "lost_in_the_middle/kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz", 2)
    rules += _first_last_rules(kv75[0]) + _first_last_rules(kv75[1], last=False)
    kv4 = _kv_file(tmp / "kv4.jsonl", 4)
    kv8 = _kv_file(tmp / "kv8.jsonl", 8, long_keys_in=(1,))
    for record in kv4 + kv8[:1]:
        rules += _first_last_rules(record)
    responses = tmp / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "no idea"}))
    args = f"responses={responses}"
    out = tmp / "out"
    harness(out / "qa", "ext-canned-gen", args,
            "litm_qa_closedbook,litm_qa_oracle,litm_qa_10docs,litm_qa_10docs_qac,litm_qa_20docs",
            "--metadata", json.dumps({"litm_qa_file": str(qa_file)}))
    harness(out / "kv75", "ext-canned-gen", args, "litm_kv_75keys", "--limit", "8")
    harness(out / "kv4", "ext-canned-gen", args, "litm_kv_generated",
            "--metadata", json.dumps({"litm_kv_pairs": 4, "litm_kv_file": str(tmp / "kv4.jsonl"), "litm_positions": "all"}))
    harness(out / "kv8", "ext-canned-gen", args, "litm_kv_generated",
            "--metadata", json.dumps({"litm_kv_pairs": 8, "litm_kv_file": str(tmp / "kv8.jsonl"), "litm_positions": "all",
                                      "max_length": 3000, "tokenizer": str(tiny_model_dir)}))
    return out


# -- MAGNIFICo with canned SQL ------------------------------------------------------------------
#
# Run 1 (interpretations "maximum,average" in --metadata): direct, description (end, start) and
# few-shot tasks (plausible / foreign forms) and the dialogue start/end tasks. The model
# answers with the gold SQL:
#   - in the "-- <question>\nSELECT" prompts (direct, description, few-shot): every item of
#     maximum (novel and base) and the base items of average; average's novel items get a
#     query that fails. Per interpretation: maximum EX 1/1 -> 100, average 0/1 -> 0; rel_perf
#     (1/2)(100 + 0) = 50, nothing left out, ex_base 1.
#   - in the dialogue prompts ("<question>\n\nUser2: SELECT"): maximum only. average's base
#     EX is 0 < 5%: left out; rel_perf = maximum's = 100; interp_left_out 1.
# Run 2 (interpretations=hire_date,dock_count): magnifico_phrase_direct, gold SQL for every item
#   of hire_date only: hire_date 100, dock_count left out (base 0) -> rel_perf 100, 1 left out.
# Run 3 (the pairs maximum+salary_more_than, average+salary_more_than): magnifico_multi_direct_plausible,
#   gold SQL for every base item (combination/baseline.tsv) and for the novel items of the first
#   pair only: 100 and 0 -> rel_perf 50, nothing left out.

MAGNIFICO_FORM_DIRS = ("baseline", "plausible", "nonsense", "adversarial")


def _magnifico_items(data_dir: Path, interpretation: str) -> dict[str, list[tuple[str, str]]]:
    """{form folder: [(question text, gold SQL)]} of an interpretation's test files (the authors' TSV layout)."""
    items = {}
    for form in MAGNIFICO_FORM_DIRS:
        path = data_dir / "magnifico" / "magnifico_data" / interpretation / form / "test.tsv"
        if not path.exists():
            continue
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        items[form] = [(row["Question"].lstrip('"').split(":", 1)[1].split(" | ", 1)[0].strip(), row["Parse"]) for row in rows]
    return items


def _sql_rules(items: list[tuple[str, str]], dialogue: bool, plain: bool) -> list[dict]:
    rules = []
    for text, gold in items:
        body = gold.strip()[len("select "):] if gold.strip().lower().startswith("select ") else gold
        if plain:
            rules.append({"contains": f"-- {text}\nSELECT", "response": body})
        if dialogue:
            rules.append({"contains": f"{text}\n\nUser2: SELECT", "response": body})
    return rules


MULTI_PAIRS = (("maximum", "salary_more_than"), ("average", "salary_more_than"))


def _combination_items(data_dir: Path, pair: tuple[str, str]) -> tuple[list, list]:
    """(novel, base) (question text, gold) of a pair: the rows of concept.tsv with the plausible words, and
    the same rows of baseline.tsv (row-aligned; it has no interpretation columns)."""
    root = data_dir / "magnifico"
    forms = json.loads((root / "interpretations.json").read_text())
    words = [forms[name]["forms"]["plausible"] for name in pair]
    tables = []
    for name in ("concept.tsv", "baseline.tsv"):
        with open(root / "magnifico_data" / "combination" / name, newline="", encoding="utf-8") as handle:
            tables.append(list(csv.DictReader(handle, delimiter="\t")))
    concept, baseline = tables
    assert len(concept) == len(baseline)
    rows = [i for i, r in enumerate(concept) if (r["Interpretation1"], r["Interpretation2"]) == pair]

    def text(row: dict) -> str:
        return row["Question"].lstrip('"').split(":", 1)[1].split(" | ", 1)[0].strip()

    novel = [(text(concept[i]).replace("concept_word1", words[0]).replace("concept_word2", words[1]), concept[i]["Parse"])
             for i in rows]
    return novel, [(text(baseline[i]), baseline[i]["Parse"]) for i in rows]


def magnifico_scripted(tmp: Path, data_dir: Path) -> Path:
    """Three runs of one scripted model (see above); returns their common parent directory."""
    data = Path(data_dir)
    maximum, average = _magnifico_items(data, "maximum"), _magnifico_items(data, "average")
    hire_date = _magnifico_items(data, "hire_date")
    golds: dict[str, set] = {}
    for items in (maximum, average):
        for form in items.values():
            for text, gold in form:
                golds.setdefault(text, set()).add(gold)
    assert all(len(g) == 1 for g in golds.values()), "one question text with two gold queries: ambiguous rules"
    # A few base questions are in both interpretations' files (same gold): answered in the plain
    # prompts as intended; kept out of the dialogue rules so that average's dialogue base EX is 0.
    # maximum's dialogue base EX is then a little under 1, its novel EX 1: rel still 100.
    shared = {text for form in average.values() for text, _ in form}
    rules = [rule for form in maximum.values() for rule in _sql_rules(form, dialogue=False, plain=True)]
    rules += [rule for form in maximum.values()
              for rule in _sql_rules([(t, g) for t, g in form if t not in shared], dialogue=True, plain=False)]
    rules += _sql_rules(average["baseline"], dialogue=False, plain=True)
    rules += [rule for form in hire_date.values() for rule in _sql_rules(form, dialogue=False, plain=True)]
    for n, pair in enumerate(MULTI_PAIRS):
        novel, base = _combination_items(data, pair)
        assert novel and len(novel) == len(base)
        rules += _sql_rules(base + (novel if n == 0 else []), dialogue=False, plain=True)
    responses = tmp / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "no_such_column FROM no_such_table"}))
    out = tmp / "out"
    args = f"responses={responses}"
    harness(out / "single", "ext-canned-gen", args,
            "magnifico_direct_plausible,magnifico_direct_foreign,magnifico_description_end_plausible,"
            "magnifico_description_start_plausible,magnifico_fewshot_plausible,magnifico_fewshot_foreign,"
            "magnifico_dialogue_start_plausible,magnifico_dialogue_end_plausible",
            "--metadata", json.dumps({"interpretations": "maximum,average"}), "--confirm_run_unsafe_code")
    harness(out / "phrase", "ext-canned-gen", args, "magnifico_phrase_direct",
            "--metadata", json.dumps({"interpretations": "hire_date,dock_count"}), "--confirm_run_unsafe_code")
    harness(out / "multi", "ext-canned-gen", args, "magnifico_multi_direct_plausible",
            "--metadata", json.dumps({"interpretations": ["+".join(pair) for pair in MULTI_PAIRS]}),
            "--confirm_run_unsafe_code")
    return out


# -- ELITR-Bench with canned answers and a stub judge -----------------------------------------
#
# The model answers "an answer" to everything; the judge (a local OpenAI-compatible stub)
# scores by the question it is shown (question + reference identify it): answer position
# B 8, M 3, E 7, S 8, plus 1 for "who" questions, plus (judge seed - 2023); the judge seed is
# the run's --seed. Every answer is scored (judge failures, which make a task's score undefined,
# are covered by the hand-written results in tests/fixtures/results). Runs: --seed 2023 and
# --seed 2024, each with elitr_bench_qa_dev_st, elitr_bench_qa_dev_mt and elitr_bench_conv_dev_mt
# (all 141 dev questions).

ELITR_POSITION_SCORE = {"B": 8, "M": 3, "E": 7, "S": 8}


def elitr_questions(set_name: str) -> list[dict]:
    """The dev questions of a set, with meeting ids, read through the data layer (the zip is encrypted)."""
    from lm_eval_ext.data import read_zip_member

    data = json.loads(read_zip_member("elitr_bench", "data.zip", f"data/elitr-bench-{set_name}_dev.json", password=b"utter"))
    return [{**q, "meeting": m["id"]} for m in data["meetings"] for q in m["questions"]]


def elitr_judge_score(question: dict, seed: int) -> int:
    """The stub judge's score of a question."""
    return ELITR_POSITION_SCORE[question["answer-position"]] + (question["question-type"] == "who") + (seed - 2023)


def elitr_scripted(tmp: Path) -> Path:
    """Two seed runs of the ELITR-Bench dev tasks judged by a stub judge; returns their parent directory."""
    import re

    from helpers.judge import answering_the_probe
    from doubles.stub_openai import StubOpenAIServer

    by_text = {}
    for set_name in ("qa", "conv"):
        for q in elitr_questions(set_name):
            key = (q["question"].strip(), q["groundtruth-answer"].strip())
            assert by_text.setdefault(key, q)["answer-position"] == q["answer-position"], key
            by_text[key] = q

    def responder(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        match = re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:\n.*?\n\n### Reference answer \(score 10\):\n"
                          r"(.*?)\n\n### Score rubric:", prompt, re.S)
        score = elitr_judge_score(by_text[(match[1].strip(), match[2].strip())], request["seed"])
        return f"Feedback: fine.\n\\boxed{{{score}}}"

    responses = tmp / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "an answer"}))
    out = tmp / "out"
    with StubOpenAIServer(responder=answering_the_probe(responder), models=["stub-judge"]) as judge:
        # with prices, so that the results, the report and the leaderboard record state dollars beside the tokens
        metadata = json.dumps({"judge_base_url": judge.base_url, "judge_model": "stub-judge", "judge_cache": "none",
                               "judge_price_input": 2.5, "judge_price_output": 10})
        for seed in (2023, 2024):
            harness(out / f"seed_{seed}", "ext-canned-gen", f"responses={responses}",
                    "elitr_bench_qa_dev_st,elitr_bench_qa_dev_mt,elitr_bench_conv_dev_mt", "--seed", str(seed),
                    "--metadata", metadata, env={"OPENAI_API_KEY": "sk-test-not-a-secret"})
    return out


# -- one task of each generating benchmark, for the scaled-out runs (tests/test_multiprocess.py, tests/test_vllm.py) --

# The gold SQL, after the prompt's SELECT, of magnifico_direct_plausible's 4 base items and novel items 0 and 1
# (documents 0-7): scored, ex 2/4, ex_base 1, rel_perf 50.
MAGNIFICO_GOLDS = {
    "what are the dates with a coveted temperature higher than 85?": "date from weather where max_temperature_f > 85",
    "for each city, return the coveted latitude among its stations.": "city , max(lat) from station group by city",
    "what are the dates with a maximum temperature higher than 85?": "date from weather where max_temperature_f > 85",
    "for each city, return the highest latitude among its stations.": "city , max(lat) from station group by city",
    "for each city, what is the highest latitude for its stations?": "city , max(lat) from station group by city",
    "what is the total and maximum duration of trips with bike id 636?":
        "sum(duration) , max(duration) from trip where bike_id = 636",
}


def litm_kv4_rules(path: Path) -> list[dict]:
    """Write three 4-pair key-value examples to ``path`` (a ``litm_kv_file``) and return the rules answering them.

    Example 1's keys have 4,000 characters: its 4 prompts do not fit a small context and are skipped. The
    value is given when the queried pair opens the object (position 1): acc_pos_1 1, the others 0, acc 2/8.
    """
    rules, records = [], []
    for n in range(3):
        kv = [[f"{n:04x}{j:04x}-key-{'k' * (4000 if n == 1 else 0)}", f"{n:04x}{j:04x}-value"] for j in range(4)]
        records.append({"ordered_kv_records": kv, "key": kv[1][0], "value": kv[1][1]})
        rules.append({"contains": f'{{"{kv[1][0]}": "{kv[1][1]}"', "response": kv[1][1]})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return rules


def elitr_meeting_rules(meetings: tuple[str, ...]) -> tuple[list[dict], dict[str, str]]:
    """Rules by which a dev-set meeting answers "<meeting>-answer-<turn>", and each meeting's first transcript line.

    A meeting is told apart by its transcript's first line (kept when the middle of a transcript is cut);
    the turn is the number of QUESTION: markers in the prompt (the scripted models' ``turn_marker``).
    """
    from lm_eval_ext.elitr.data import build_documents

    _, transcripts = build_documents("qa", "dev", "en")
    firsts = {t.meeting: t.text.splitlines()[0] for t in transcripts if t.meeting in meetings}
    assert len(set(firsts.values())) == len(meetings)
    return [{"contains": first, "response": f"{m}-answer-{{turn}}"} for m, first in firsts.items()], firsts
