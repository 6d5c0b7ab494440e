"""Checking a judge before a run spends anything: key, endpoint, model, one tiny request that parses.

:func:`probe` makes two requests at most, each with a short timeout and no retry: the endpoint's
model list (is the model served?) and one judge request on a trivial item (does the reply carry a
score the judge's parser reads?). A failure is one :class:`JudgeError` paragraph. The judge's
cache is not used: a probe must reach the endpoint. ``--metadata judge_check=false`` skips it
(a rerun whose verdicts are all cached needs no judge).
"""
from __future__ import annotations

import threading

from .client import CallBudget, ItemRejected, JudgeClient, TransientError
from .config import JudgeConfig, metadata_name
from .errors import JudgeRequestRejected, JudgeUnreachableError
from .records import JudgeItem
from .templates import judge_setup

PROBE_TIMEOUT = 30.0  # seconds for each probe request: a judge slower than this for a 1-word answer hangs
PROBE_ITEM = JudgeItem(question="What is two plus two?", response="Four.", reference="4")


def probe(config: JudgeConfig) -> None:
    """Raise a one-paragraph :class:`JudgeError` unless the judge of ``config`` answers a trivial item with a score."""
    from .runner import Judge  # messages and request bodies exactly as the run will send them

    setup = judge_setup(config)
    client = JudgeClient(config, stop=threading.Event(), budget=CallBudget(None))  # raises when the key is missing
    where = f"The judge at {config.base_url_host()} (model {setup.model})"
    fix = (f"Check {metadata_name('base_url')}, {metadata_name('model')} and the key in {config.api_key_env}; "
           f"--metadata {metadata_name('check')}=false skips this check (only for a rerun whose verdicts are all cached).")
    served = _served_models(client, where, fix)
    if served is not None and setup.model not in served:
        raise JudgeRequestRejected(f"{where} is reachable, but it does not serve the model {setup.model!r} "
                                   f"(it serves: {', '.join(sorted(served)[:10]) or 'none'}). {fix}")
    judge = Judge(config, progress=False)
    try:
        request = judge.request(judge.messages(PROBE_ITEM), 0)
        try:
            reply = client.complete(request, timeout=min(PROBE_TIMEOUT, config.timeout), tries=1)
        except TransientError as err:
            raise JudgeUnreachableError(f"{where} did not answer a one-line probe within {min(PROBE_TIMEOUT, config.timeout):g} "
                                        f"s ({client.redact(str(err))}). Nothing was generated. {fix}") from None
        except ItemRejected as err:
            raise JudgeRequestRejected(f"{where} refused a one-line probe ({client.redact(str(err))}). {fix}") from None
        except JudgeRequestRejected as err:
            raise JudgeRequestRejected(f"{where} refused a one-line probe: {err}") from None
    finally:
        judge.close()
    parsed = setup.parser.parse(reply, setup.low, setup.high)
    if parsed.raw_score is None:
        raise JudgeRequestRejected(
            f"{where} answered a one-line probe, but its reply holds no score the {setup.parser.name} parser reads "
            f"({parsed.reason}); reply: {client.redact(reply)[:300]!r}. Is this the model the template was written "
            f"for? {fix}")


def _served_models(client: JudgeClient, where: str, fix: str) -> set[str] | None:
    """The model ids the endpoint lists, or None when it lists none (not every server has /models)."""
    import openai

    try:
        return {model.id for model in client.list_models(timeout=PROBE_TIMEOUT)}
    except openai.NotFoundError:
        return None
    except (openai.APIConnectionError, openai.APITimeoutError) as err:
        raise JudgeUnreachableError(f"{where} cannot be reached ({type(err).__name__}: {client.redact(str(err))}). "
                                    f"Nothing was generated. {fix}") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
        raise JudgeRequestRejected(f"{where} refused the key in {client.config.api_key_env} "
                                   f"({client.redact(str(err))}). {fix}") from None
    except openai.APIError:
        return None  # some servers answer /models with an error; the probe request below still checks them
