"""The judge's pure parts: score parsing (a table of raw replies), templates, configuration."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from lm_eval_ext.judge.config import OPTIONS, cli_flag, env_name, metadata_name, resolve_config
from lm_eval_ext.judge.errors import JudgeConfigError
from lm_eval_ext.judge.parser import PARSERS
from lm_eval_ext.judge.templates import JUDGES, fill_template, judge_setup

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
# The judge prompts ELITR-Bench defines (Thonet et al., COLING 2025: its GPT-4 rubric judge and its
# Prometheus judge), pinned by sha256: the shipped templates must not drift from them.
PUBLISHED_TEMPLATES = {
    "judge_gpt4_rubric_en.txt": "befed4d27cc723607d772b342e96a26bb7387d68f3556acb8472733dad6c141f",
    "judge_gpt4_rubric_cs.txt": "62f13986e4a3a73831ccc902ef325f430e30c1ffb2d680b78ee59a989fbedb88",
    "judge_prometheus_en.txt": "c541bb33eefaefac9c268008c098be1f534014d59af6565ddbe5627c09cc1707",
    "judge_prometheus_cs.txt": "56becf9c51efdb7e58720152ae137a7b76aa1a6dd6d575b5f6661ed676a27af6",
}

# (parser, low, high, raw reply, expected raw score or None = parse failure)
PARSE_TABLE = [
    # rubric10, English range 1..10
    ("boxed", 1, 10, "The response is correct.\n\\boxed{9}", 9),
    ("boxed", 1, 10, "\\boxed{10}", 10),
    ("boxed", 1, 10, "Feedback... $\\boxed{ 7 }$", 7),
    ("boxed", 1, 10, "Score: \\boxed{07}", 7),
    # several markers: the last well-formed one counts
    ("boxed", 1, 10, "A perfect answer would get \\boxed{10}, this one gets \\boxed{4}.", 4),
    ("boxed", 1, 10, "\\boxed{3} at first, then on reflection \\boxed{6}", 6),
    # the marker in the middle of the feedback, text after it
    ("boxed", 1, 10, "I give \\boxed{8} because the response names both people but adds details.", 8),
    # malformed markers are not markers: an earlier well-formed one counts
    ("boxed", 1, 10, "\\boxed{5} ... or maybe \\boxed{5.5}", 5),
    ("boxed", 1, 10, "\\boxed{6} then \\boxed{}", 6),
    # out of range: the last marker decides; no fallback to an earlier one, no clipping
    ("boxed", 1, 10, "\\boxed{11}", None),
    ("boxed", 1, 10, "\\boxed{0}", None),
    ("boxed", 1, 10, "\\boxed{8} ... final: \\boxed{12}", None),
    ("boxed", 1, 10, "\\boxed{99999999999999999999}", None),
    # missing or malformed only
    ("boxed", 1, 10, "The response is mostly right. Score: 8", None),
    ("boxed", 1, 10, "\\boxed{-1}", None),
    ("boxed", 1, 10, "\\boxed{7/10}", None),
    ("boxed", 1, 10, "\\boxed{eight}", None),
    ("boxed", 1, 10, "boxed{8}", None),
    ("boxed", 1, 10, "", None),
    ("boxed", 1, 10, None, None),
    # Czech rubric: 0 (not in Czech) is a valid score
    ("boxed", 0, 10, "Odpověď není v češtině. \\boxed{0}", 0),
    ("boxed", 0, 10, "\\boxed{10}", 10),
    ("boxed", 0, 10, "\\boxed{11}", None),
    # prometheus5, English range 1..5; [RESULT] spacing variants
    ("result", 1, 5, "Feedback: The response is partially correct. [RESULT] 3", 3),
    ("result", 1, 5, "Feedback: ok [RESULT]4", 4),
    ("result", 1, 5, "Feedback: ok [RESULT]   5", 5),
    ("result", 1, 5, "Feedback: ok\n[RESULT]\n2", 2),
    ("result", 1, 5, "Feedback: ok [RESULT]\t1\n", 1),
    ("result", 1, 5, "Feedback: ok [RESULT]: 4", 4),
    ("result", 1, 5, "Feedback: ok [RESULT] (4)", 4),
    ("result", 1, 5, "Feedback: ok [RESULT] 4.", 4),
    ("result", 1, 5, "Feedback: a 5 needs [RESULT] 5 style, here [RESULT] 2 and more text", 2),
    ("result", 1, 5, "Feedback: ok [RESULT] 4.5", None),
    ("result", 1, 5, "Feedback: ok [RESULT] 6", None),
    ("result", 1, 5, "Feedback: ok [RESULT] 10", None),
    ("result", 1, 5, "Feedback: ok [RESULT] 0", None),
    ("result", 1, 5, "Feedback: ok [RESULT]", None),
    ("result", 1, 5, "Feedback: ok. Score: 4", None),
    ("result", 1, 5, "Feedback: ok [result] 4", None),
    # Czech Prometheus: 0 is valid
    ("result", 0, 5, "Feedback: Odpověď je anglicky. [RESULT] 0", 0),
    ("result", 0, 5, "Feedback: ok [RESULT] 5", 5),
]


@pytest.mark.parametrize(("parser", "low", "high", "reply", "expected"), PARSE_TABLE)
def test_parse_table(parser, low, high, reply, expected):
    parsed = PARSERS[parser].parse(reply, low, high)
    assert parsed.raw_score == expected
    if expected is None:
        assert parsed.reason  # a failure always says why
    else:
        assert parsed.reason is None


def test_failure_reasons_name_the_problem():
    assert "outside 1..10" in PARSERS["boxed"].parse("\\boxed{8} \\boxed{12}", 1, 10).reason
    assert "no [RESULT] N score" in PARSERS["result"].parse("nothing", 1, 5).reason


# -- templates ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PUBLISHED_TEMPLATES))
def test_templates_are_byte_copies_of_the_published_prompts(name):
    assert hashlib.sha256((TEMPLATES / name).read_bytes()).hexdigest() == PUBLISHED_TEMPLATES[name]


@pytest.mark.parametrize(("judge", "language", "file", "low", "high", "scale", "system"), [
    ("rubric10", "en", "judge_gpt4_rubric_en.txt", 1, 10, 1, "You are a helpful assistant."),
    ("rubric10", "cs", "judge_gpt4_rubric_cs.txt", 0, 10, 1, "You are a helpful assistant."),
    ("prometheus5", "en", "judge_prometheus_en.txt", 1, 5, 2, None),
    ("prometheus5", "cs", "judge_prometheus_cs.txt", 0, 5, 2, None),
])
def test_builtin_judges(judge, language, file, low, high, scale, system):
    setup = judge_setup(resolve_config(explicit={"judge": judge, "language": language}, environ={}))
    assert (setup.template_name, setup.low, setup.high, setup.scale, setup.system_message) == (file, low, high, scale, system)
    raw = (TEMPLATES / file).read_bytes()
    assert setup.template_sha256 == hashlib.sha256(raw).hexdigest()
    # The prompt: the published text with the three stripped values in place (plain replace is safe
    # here because the values hold no braces), after the judge's system message if it has one.
    messages = setup.messages("  Who came?\n", "\nPERSON1 and PERSON2.  ", " PERSON1, PERSON2\n")
    expected = raw.decode().replace("{question}", "Who came?").replace("{response}", "PERSON1 and PERSON2.") \
        .replace("{reference}", "PERSON1, PERSON2")
    assert messages[-1] == {"role": "user", "content": expected}
    assert messages[:-1] == ([{"role": "system", "content": system}] if system else [])


def test_fill_keeps_literal_braces_and_never_refills_inserted_text():
    template = "Q: {question}\nR: {response}\nRef: {reference}\nWrite \\boxed{} and {other}."
    out = fill_template(template, question="q {x}", response="I quote {reference} and {question}", reference="ref")
    assert out == "Q: q {x}\nR: I quote {reference} and {question}\nRef: ref\nWrite \\boxed{} and {other}."


def test_user_template(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Grade {response} to {question} vs {reference}. Say [RESULT] N.\n", encoding="utf-8")
    config = resolve_config(explicit={"template": str(path), "parser": "result", "score_range": "1-3",
                                      "score_scale": "3", "system_message": "none"}, environ={})
    setup = judge_setup(config)
    assert (setup.template_name, setup.parser.name, setup.low, setup.high, setup.scale) == ("mine.txt", "result", 1, 3, 3)
    assert setup.messages("q", "r", "ref") == [{"role": "user", "content": "Grade r to q vs ref. Say [RESULT] N.\n"}]
    bad = tmp_path / "bad.txt"
    bad.write_text("Grade {response} against {reference}", encoding="utf-8")
    with pytest.raises(JudgeConfigError, match=r"lacks the field\(s\) \{question\}"):
        judge_setup(resolve_config(explicit={"template": str(bad)}, environ={}))
    with pytest.raises(JudgeConfigError, match="LOW-HIGH"):
        judge_setup(resolve_config(explicit={"score_range": "10-1"}, environ={}))


# -- configuration ----------------------------------------------------------------------------


def test_defaults_are_the_papers():
    config = resolve_config(environ={})
    setup = judge_setup(config)
    assert (config.judge, setup.model, config.temperature, config.top_p, config.max_tokens) == (
        "rubric10", "gpt-4-0613", 0.6, 0.9, 1024)
    assert config.seed == 2023  # no run seed known: the authors' default
    assert resolve_config(environ={}, run_seed=1234).seed == 1234
    assert judge_setup(resolve_config(explicit={"judge": "prometheus5"}, environ={})).model == \
        "prometheus-eval/prometheus-13b-v1.0"


def test_precedence_explicit_metadata_env_yaml():
    env = {"LM_EVAL_EXT_JUDGE_MODEL": "env-model", "LM_EVAL_EXT_JUDGE_TEMPERATURE": "0.1",
           "LM_EVAL_EXT_JUDGE": "prometheus5", "LM_EVAL_EXT_JUDGE_CONCURRENCY": "3"}
    yaml = {"model": "yaml-model", "language": "cs", "temperature": 0.9, "top_p": 0.5}
    metadata = {"judge_model": "meta-model", "judge_temperature": 0.2, "judge_max_calls": 50, "pretrained": "x"}
    config = resolve_config(explicit={"model": "cli-model"}, metadata=metadata, environ=env, task_defaults=yaml,
                            run_seed=7)
    assert config.model == "cli-model"          # explicit beats everything
    assert config.temperature == 0.2            # metadata beats env and YAML
    assert config.judge == "prometheus5"        # env beats the default
    assert config.concurrency == 3 and isinstance(config.concurrency, int)
    assert config.top_p == 0.5 and config.language == "cs"  # YAML beats defaults
    assert config.max_calls == 50 and config.seed == 7


def test_config_coercion_and_errors():
    assert resolve_config(explicit={"cache": "none", "max_calls": "None", "dry_run": "yes"}, environ={}).cache is None
    assert resolve_config(explicit={"dry_run": "on"}, environ={}).dry_run is True
    with pytest.raises(JudgeConfigError, match="Unknown judge option 'judge_modle'"):
        resolve_config(metadata={"judge_modle": "x"}, environ={})
    with pytest.raises(JudgeConfigError, match="must be an integer"):
        resolve_config(environ={"LM_EVAL_EXT_JUDGE_CONCURRENCY": "many"})
    # a misspelled variable is an error, as a misspelled --metadata key is; its value (maybe a key) is not shown
    with pytest.raises(JudgeConfigError, match=re.escape(
            "The environment variable LM_EVAL_EXT_JUDGE_MODLE names no judge option. Did you mean "
            "LM_EVAL_EXT_JUDGE_MODEL? Judge options in the environment are LM_EVAL_EXT_JUDGE and "
            "LM_EVAL_EXT_JUDGE_<OPTION> for the options of docs/judge.md: rename or unset it.")):
        resolve_config(environ={"LM_EVAL_EXT_JUDGE_MODLE": "sk-secret", "LM_EVAL_EXT_JUDGE_MODEL": "m"})
    # the variable that holds the key may have any name, that prefix included
    keyed = {"LM_EVAL_EXT_JUDGE_API_KEY_ENV": "LM_EVAL_EXT_JUDGE_KEY", "LM_EVAL_EXT_JUDGE_KEY": "sk-secret"}
    assert resolve_config(environ=keyed).api_key_env == "LM_EVAL_EXT_JUDGE_KEY"
    assert resolve_config(metadata={"judge_api_key_env": "LM_EVAL_EXT_JUDGE_KEY"},
                          environ={"LM_EVAL_EXT_JUDGE_KEY": "sk-secret"}).api_key_env == "LM_EVAL_EXT_JUDGE_KEY"
    with pytest.raises(JudgeConfigError, match="LM_EVAL_EXT_JUDGE_KEY names no judge option"):
        resolve_config(environ={"LM_EVAL_EXT_JUDGE_KEY": "sk-secret"})  # the key is read from OPENAI_API_KEY
    with pytest.raises(JudgeConfigError, match="Unknown judge 'gpt5'"):
        resolve_config(explicit={"judge": "gpt5"}, environ={})
    with pytest.raises(JudgeConfigError, match="not an http"):
        resolve_config(explicit={"base_url": "localhost:8000"}, environ={})
    with pytest.raises(JudgeConfigError, match="at least 1"):
        resolve_config(explicit={"concurrency": 0}, environ={})
    # a value of the wrong JSON type (--metadata is JSON) says what to give, with an example
    with pytest.raises(JudgeConfigError, match=re.escape(
            """The judge option 'dry_run' (from --metadata judge_dry_run) must be true or false, not 3; e.g. """
            """--metadata '{"judge_dry_run": true}'.""")):
        resolve_config(metadata={"judge_dry_run": 3}, environ={})


def test_base_url_host_drops_credentials_and_query():
    config = resolve_config(explicit={"base_url": "https://user:pw@judge.example.org:8443/v1?key=abc"}, environ={})
    assert config.base_url_host() == "judge.example.org:8443"
    assert config.endpoint_id() == "judge.example.org:8443/v1"


def test_every_option_is_documented():
    """docs/judge.md is the one place: every option with its flag, metadata key and variable."""
    docs = (ROOT / "docs" / "judge.md").read_text(encoding="utf-8")
    for option in OPTIONS:
        for name in (cli_flag(option.name), metadata_name(option.name), env_name(option.name)):
            assert re.search(rf"`{re.escape(name)}`", docs), f"{name} ({option.name}) missing from docs/judge.md"
    for judge in JUDGES:
        assert f"`{judge}`" in docs


def test_on_by_default_flags_can_be_turned_off():
    import argparse

    from lm_eval_ext.commands.judge import add_judge_options, judge_flags_as_metadata

    parser = argparse.ArgumentParser()
    add_judge_options(parser)
    assert judge_flags_as_metadata(parser.parse_args(["--no-judge-check"])) == {"judge_check": False}
    assert judge_flags_as_metadata(parser.parse_args(["--judge-check"])) == {"judge_check": True}
    assert judge_flags_as_metadata(parser.parse_args([])) == {}
