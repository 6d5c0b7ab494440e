"""Checking a judge before a run spends anything: key, endpoint, model, one tiny request that parses.

:func:`probe` makes two requests at most, each one try with a deadline for the whole call (a reply
that keeps arriving is cut) and the size cap of every judge reply: the endpoint's model list (is the
model served?), within :data:`PROBE_TIMEOUT`, and one judge request on a trivial item (does the reply
carry a score the judge's parser reads?), within the run's own ``timeout``: that reply is a whole
judge reply (feedback, then the score), which a slow local judge may need a minute for, as every call
of the run. A failure is one :class:`JudgeError` paragraph. The judge's
cache is not used: a probe must reach the endpoint. ``--metadata '{"judge_check": false}'`` skips it
(a rerun whose verdicts are all cached needs no judge).
"""
from __future__ import annotations

import sys

from .client import CallBudget, ItemRejected, JudgeClient, TransientError, run
from .config import JudgeConfig, how_to_set, metadata_name
from .errors import JudgeRequestRejected, JudgeUnreachableError
from .records import JudgeItem
from .templates import judge_setup

# Deadline of the model list (the judge's `timeout` if lower): a server slower than this to list its models hangs.
PROBE_TIMEOUT = 30.0
PROBE_ITEM = JudgeItem(question="What is two plus two?", response="Four.", reference="4")


def probe(config: JudgeConfig) -> None:
    """Raise a one-paragraph :class:`JudgeError` unless the judge of ``config`` answers a trivial item with a score."""
    setup = judge_setup(config)
    where = f"The judge at {config.base_url_host()} (model {setup.model})"
    fix = (f"Check {metadata_name('base_url')}, {metadata_name('model')} and the key in {config.api_key_env}; "
           f"{how_to_set('check', 'false')} skips this check (only for a rerun whose verdicts are all cached).")
    client = JudgeClient(config, budget=CallBudget(None), connections=1)  # raises when the key is missing
    # a slow judge may take up to `timeout` for the reply: say what is being waited for
    print(f"judge check: asking {setup.model} at {config.base_url_host()} for its model list and one probe reply "
          f"(up to {config.timeout:g} s)", file=sys.stderr)
    reply = run(_probe(client, config, setup.model, where, fix))
    parsed = setup.parser.parse(reply, setup.low, setup.high)
    if parsed.raw_score is None:
        raise JudgeRequestRejected(
            f"{where} answered a one-line probe, but its reply holds no score the {setup.parser.name} parser reads "
            f"({parsed.reason}); reply: {client.redact(reply)[:300]!r}. Is this the model the template was written "
            f"for? Check {metadata_name('judge')} (the template and parser) and {metadata_name('model')}. If it is the "
            f"judge you mean to use, {how_to_set('check', 'false')} skips this check: a reply of the run that holds no "
            "score is then asked again and, after the re-asks, counted as a judge failure, never as a score.")


async def _probe(client: JudgeClient, config: JudgeConfig, model: str, where: str, fix: str) -> str:
    """The judge's reply to the probe item, once its model list (if any) names the model; one try of each."""
    from .runner import Judge  # messages and request bodies exactly as the run will send them

    judge = Judge(config, progress=False)
    try:
        try:
            served = await client.list_models(timeout=min(PROBE_TIMEOUT, config.timeout))
        except TransientError as err:
            raise JudgeUnreachableError(f"{where} cannot be reached ({client.redact(str(err))}). "
                                        f"Nothing was generated. {fix}") from None
        except JudgeRequestRejected as err:
            raise JudgeRequestRejected(f"{where} refused the key in {config.api_key_env} ({err}). {fix}") from None
        if served is not None and model not in served:
            raise JudgeRequestRejected(f"{where} is reachable, but it does not serve the model {model!r} "
                                       f"(it serves: {', '.join(sorted(served)[:10]) or 'none'}). {fix}")
        try:
            return await client.complete(judge.request(judge.messages(PROBE_ITEM), 0), timeout=config.timeout,
                                         tries=1)
        except TransientError as err:
            if err.kind == "timeout":  # reachable (the model list, if any, answered), but too slow for the run
                fix = (f"Each call of the run gets the same {config.timeout:g} s, so every answer would time out "
                       f"too. If the judge is slow rather than stuck (a reply may be up to {config.max_tokens} "
                       f"tokens long), give it more time: {how_to_set('timeout', '300')}.")
            raise JudgeUnreachableError(f"{where} gave no usable answer to a one-line probe in one try of at most "
                                        f"{config.timeout:g} s ({client.redact(str(err))}). Nothing was generated. "
                                        f"{fix}") from None
        except ItemRejected as err:
            raise JudgeRequestRejected(f"{where} refused a one-line probe ({client.redact(str(err))}). {fix}") from None
        except JudgeRequestRejected as err:
            raise JudgeRequestRejected(f"{where} refused a one-line probe: {err}") from None
    finally:
        judge.close()
        await client.close()
