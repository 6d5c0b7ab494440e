"""MAGNIFICo data reading: the shipped interpretation facts, question parsing, settings and documents."""
from __future__ import annotations

import json
import re

import pytest


def test_shipped_facts_equal_the_mirrors_interpretations_json(data_dir):
    from lm_eval_ext.data import resolve_file
    from lm_eval_ext.magnifico.facts import INTERPRETATIONS

    assert INTERPRETATIONS == json.loads(resolve_file("magnifico", "interpretations.json").read_text(encoding="utf-8"))


def test_question_parsing():
    from lm_eval_ext.magnifico.examples import parse_question

    field = "music_4: Find the issue date of volume with volume issue 45:15 and the prevalent weeks on top. | artist : a , b | volume : c"
    # the whole question is kept, colon included (the authors' code cut it at "45")
    assert parse_question(field) == ("music_4", "Find the issue date of volume with volume issue 45:15 and the "
                                                "prevalent weeks on top.", ("artist", "volume"))
    assert parse_question('"sakila_1: q? | t : x"')[0] == "sakila_1"


def test_quoted_fields_follow_csv_rules(data_dir):
    from lm_eval_ext.magnifico.examples import read_examples

    # lname_fname/plausible/train.tsv row 2 is `"allergy_1: ... with ""e"" in alias ..."` in the file
    example = read_examples("lname_fname/plausible/train.tsv")[2]
    assert 'with "e" in alias' in example.text and example.db_id == "allergy_1"


def test_base_mapping():
    from lm_eval_ext.magnifico.documents import Setting

    assert Setting("single", "description", "foreign", "mid").base() == Setting("single", "direct", "base")
    assert Setting("single", "fewshot", "adversarial").base() == Setting("single", "fewshot", "base")
    assert Setting("dialogue", "dialogue", "plausible", "end").base() == Setting("dialogue", "dialogue", "base", "start")
    assert Setting("multi", "description", "plausible", "end").base() == Setting("multi", "direct", "base")
    assert Setting("single", "direct", "base").base() is None


def test_invalid_settings_are_user_errors():
    from lm_eval_ext.errors import UserError
    from lm_eval_ext.magnifico.documents import Setting

    with pytest.raises(UserError, match="phrase interpretations"):
        Setting("phrase", "direct", "foreign")
    with pytest.raises(UserError, match="position"):
        Setting("single", "description", "plausible", "top")


def test_unknown_interpretations_are_user_errors_naming_the_known_ones(data_dir):
    """A misspelled name, alone or as one side of a pair, is an error that lists the names; it never selects
    nothing in silence."""
    from lm_eval_ext.errors import UserError
    from lm_eval_ext.magnifico.documents import Setting, build_documents

    for selected, wrong in (({"maximum", "averag"}, "averag"), ({"maximum+salary_more_thn"}, "maximum+salary_more_thn")):
        with pytest.raises(UserError, match=rf"Unknown interpretation\(s\) in --metadata interpretations: "
                                            rf"{re.escape(wrong)}\. .* the names are .*\bmaximum\b.*a pair is written a\+b"):
            build_documents(Setting("multi", "direct", "plausible"), selected=selected)
    assert len(build_documents(Setting("multi", "direct", "plausible"), selected={"maximum+salary_more_than"})) > 0


def test_documents_interleave_novel_and_base(data_dir):
    from lm_eval_ext.magnifico.documents import Setting, build_documents

    docs = build_documents(Setting("single", "fewshot", "foreign"), selected={"sum"})
    assert len(docs) == 100  # sum: 50 test items per form
    assert [d["role"] for d in docs[:4]] == ["novel", "base", "novel", "base"]
    assert docs[0]["demonstrations"] == [{"file": "sum/nonsense/train.tsv", "row": i} for i in range(5)]
    assert docs[1]["demonstrations"] == [{"file": "sum/baseline/train.tsv", "row": i} for i in range(5)]
    assert docs[0]["category"] == "basic" and docs[0]["form"] == "foreign"


def test_concept_form_uses_the_users_word(data_dir):
    from lm_eval_ext.errors import UserError
    from lm_eval_ext.magnifico.documents import Setting, build_documents

    docs = build_documents(Setting("single", "description", "concept", "end"), selected={"maximum"}, form_word="blicket")
    novel = docs[0]
    assert "blicket" in novel["text"] and "concept_word" not in novel["question"]
    assert novel["description"] == "blicket refers to the maximum value."
    with pytest.raises(UserError, match="form_word"):
        build_documents(Setting("single", "direct", "concept"), selected={"maximum"})
