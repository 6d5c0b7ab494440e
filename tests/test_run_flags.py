"""`lm-eval-ext run` flags the harness cannot read: one paragraph, never the harness's ValueError traceback.

lm-eval 0.4.12 and 0.5.0.dev1 split a key=value flag at every comma (tests/helpers/harness.py); there the
paragraph names the flag and gives the same arguments as JSON, which these tests feed back to the harness's
parser. On 0.4.13, which splits outside brackets, the same flags are read (the run then stops at the unknown
check of --limit 0, after the flags were read) or refused by argparse's usage line.
"""
from __future__ import annotations

import shlex

from helpers.harness import VERSION, broken
from lm_eval_ext.boundary import parse_run_args

GEN_KWARGS = "max_gen_toks=8,suppress_tokens=[0,1,2,3]"
READ = {"max_gen_toks": 8, "suppress_tokens": [0, 1, 2, 3]}
# the run's checks stop at --limit 0 once the flags are read (nothing is loaded)
READ_THEN_REFUSED = ["--model", "hf", "--model_args", "pretrained=unused", "--tasks", "lieder_base", "--limit", "0"]


def test_a_value_holding_a_comma_is_read_or_is_one_paragraph_giving_the_json(run_cli):
    proc = run_cli(["lm-eval-ext", "run", *READ_THEN_REFUSED, "--gen_kwargs", GEN_KWARGS])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    if not broken("comma_split"):
        assert parse_run_args(["--gen_kwargs", GEN_KWARGS]).gen_kwargs == READ
        assert "--limit 0: a limit is a number of documents" in proc.stderr
        return
    as_json = '{"max_gen_toks": 8, "suppress_tokens": [0, 1, 2, 3]}'
    assert proc.stderr == (
        f"lm-eval-ext: error: --gen_kwargs {GEN_KWARGS}: lm-eval {VERSION} splits a key=value argument at every "
        f"comma, so the part '1' has no key. Give the argument as JSON, which it reads whole: --gen_kwargs "
        f"{shlex.quote(as_json)}\n")
    assert parse_run_args(["--gen_kwargs", as_json]).gen_kwargs == READ


def test_the_json_given_keeps_every_argument_and_the_equals_form(run_cli):
    value = "temperature=0.5,stop=['a,b', 'c'],until='x,y',top_k=[3],do_sample=false"
    proc = run_cli(["lm-eval-ext", "run", *READ_THEN_REFUSED, f"--gen_kwargs={value}"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    flags = [f"--gen_kwargs={value}"]
    if broken("comma_split"):
        flags = shlex.split(proc.stderr.rstrip("\n").rsplit("reads whole: ", 1)[1])
        assert flags[0] == "--gen_kwargs"
    assert parse_run_args(flags).gen_kwargs == {"temperature": 0.5, "stop": ["a,b", "c"], "until": "x,y", "top_k": [3],
                                                "do_sample": False}


def test_an_argument_without_a_key_is_one_paragraph(run_cli):
    proc = run_cli(["lm-eval-ext", "run", "--model", "hf", "--model_args", "pretrained", "--tasks", "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    expected = ("lm-eval-ext: error: --model_args pretrained: 'pretrained' is not key=value. Give each argument as "
                "key=value (see `lm_eval run --help`).\n") if broken("comma_split") else \
        "lm-eval run: error: argument --model_args: expected `key=value`, got 'pretrained'\n"
    assert proc.stderr.endswith(expected)
