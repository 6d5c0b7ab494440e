"""The LIEDER stimulus generator: published sets reproduced byte for byte, and user sets that run."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.harness import assert_documents

from lm_eval_ext.errors import UserError
from lm_eval_ext.lieder.generator import generate, read_lexicon


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("stimulus_set", ["base", "diff", "two"])
def test_published_lexicon_reproduces_published_sets(data_dir, stimulus_set):
    lexicon = read_lexicon(FIXTURES / "lieder_published_lexicon.json")
    generated = "".join(json.dumps(row) + "\n" for row in generate(lexicon, stimulus_set))
    published = (Path(data_dir) / "lieder" / "stimuli" / stimulus_set / f"{stimulus_set}_stimuli.jsonl").read_text()
    assert generated == published


USER_ITEM = {"noun": "kite", "names": ["Ada", "Bo"], "np": "red kite", "np_plural": "red kites", "verb": "flew",
             "verb_negated": "didn't fly", "suffix": " at the beach", "manage": "fly", "manage_suffix": "",
             "sg": "The kite was stuck in a tree.", "pl": "The kites were stuck in a tree."}


def test_generated_sentences_for_a_new_item():
    rows = {row["id"]: row for row in generate([USER_ITEM], "diff")}
    assert rows["1_kite_affirmative_affirmative_sref"] == {
        "id": "1_kite_affirmative_affirmative_sref",
        "sent": "Ada flew a red kite at the beach and Bo flew a different red kite at the beach. The kite was stuck in a tree.",
        "expected": 0,
    }
    assert rows["1_kite_failed_failed_nonref"]["sent"] == "Ada failed to fly a red kite and Bo failed to fly a red kite as well. It's not a big deal."
    assert rows["1_kite_doubt_know_pref"]["expected"] == 0 and rows["1_kite_doubt_know_sref"]["expected"] == 1
    two = {row["id"]: row for row in generate([USER_ITEM], "two")}
    assert two["1_kite_negation_two_pref"]["sent"].startswith("Ada didn't fly a red kite at the beach but Bo flew two red kites at the beach.")
    assert two["1_kite_negation_two_pref"]["expected"] == 1
    assert len(two) == 3 * 6 * 2


def test_incomplete_lexicon_is_a_clear_error(tmp_path):
    path = tmp_path / "lex.json"
    path.write_text(json.dumps([{k: v for k, v in USER_ITEM.items() if k != "verb"}]))
    with pytest.raises(UserError, match=r"Item 0 .*\(missing: verb\)"):
        read_lexicon(path)


def test_generate_then_run_through_the_cli(run_cli, data_dir, tmp_path):
    lexicon = tmp_path / "lex.json"
    lexicon.write_text(json.dumps([USER_ITEM]))
    stimuli = tmp_path / "mine.jsonl"
    proc = run_cli(["lm-eval-ext", "lieder", "generate", str(lexicon), "--set", "base", "--output", str(stimuli)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote 36 base stimuli to {stimuli}"
    # felicitous rows more probable than infelicitous ones: every informative comparison is right
    entries = []
    for line in stimuli.read_text().splitlines():
        record = json.loads(line)
        context, continuation = record["sent"].rsplit(". ", 1)
        entries.append({"context": context + ".", "continuation": " " + continuation,
                        "logprob": {1: -5.0, 0: -9.0, -1: -7.0}[record["expected"]]})
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": entries, "default": None}))
    out = tmp_path / "out"
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-loglik-table", "--model_args", f"table={table}",
                    "--tasks", "lieder_base", "--metadata", json.dumps({"stimuli_file": str(stimuli)}), "--output_path", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert_documents(results, "lieder_base", 3)
    assert results["results"]["lieder_base"]["acc,none"] == 1.0
    assert results["results"]["lieder_base"]["acc_rel,none"] == 1.0


@pytest.mark.parametrize("stimulus_id, message", [
    ("1_dog_two_know_sref", None),
    ("1_dog_two_two_sref", "stimulus id '1_dog_two_two_sref': at most one of its two clause words may be 'two'"),
    ("1_dog_maybe_know_sref", "stimulus id '1_dog_maybe_know_sref' is not '<n>_<noun>_<first>_<second>_"),
])
def test_a_stimulus_id_names_its_clauses_and_family(stimulus_id, message):
    """A stimulus file's ids are parsed strictly: an id that names no clause family is an error, not a group
    named after ``None``."""
    from lm_eval_ext.lieder.stimuli import StimulusError, parse_row

    record = {"id": stimulus_id, "sent": "There are two dogs. The dog barked.", "expected": 0}
    if message is None:
        row = parse_row(record)
        assert (row["group"], row["family"]) == ("1_dog_know_doubt", "know_doubt")
    else:
        with pytest.raises(StimulusError, match=re.escape(message)):
            parse_row(record)


def test_a_stimuli_file_missing_a_row_the_comparisons_need_is_refused_when_loaded(data_dir, tmp_path):
    """Scoring compares every row of a group: a group without one is an error when the task loads its documents,
    before anything is asked of the model, naming the file, the group and the row."""
    from lm_eval_ext.lieder.stimuli import StimulusError, parse_row
    from lm_eval_ext.lieder.task import load_stimuli

    lines = (data_dir / "lieder/stimuli/base/base_stimuli.jsonl").read_text().splitlines()
    first = [line for line in lines if parse_row(json.loads(line))["group"] == "1_dog_affirmative_negation"]
    dropped = json.loads(first[0])["id"]
    stimuli = tmp_path / "stimuli.jsonl"
    stimuli.write_text("\n".join(first[1:]) + "\n")
    with pytest.raises(StimulusError, match=re.escape(f"{stimuli}: group 1_dog_affirmative_negation has no row for "
                                                      "pos_neg sg (context type, continuation)")):
        load_stimuli("base", stimuli_file=str(stimuli))
    stimuli.write_text("\n".join(first) + "\n")
    assert dropped == "1_dog_affirmative_negation_sref" and len(load_stimuli("base", stimuli_file=str(stimuli))["test"]) == 1
