"""The judges' prompt templates, and the resolution of a configuration to template, parser, range and model.

The built-in templates are the paper's, byte for byte (``templates/judge_*.txt``). A template
holds literal braces (``\\boxed{}``), so the three fields are filled by name in one pass, never
with ``str.format``, and a response that itself contains ``{reference}`` is inserted verbatim.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..paths import templates_dir
from .config import JudgeConfig, how_to_set
from .definitions import JUDGES
from .errors import JudgeConfigError
from .parser import PARSERS, ScoreParser
from .records import JudgeRecord

FIELDS = ("question", "response", "reference")
_FIELD_RE = re.compile(r"\{(question|response|reference)\}")


@dataclass(frozen=True)
class JudgeSetup:
    """What one configured judge sends and how it reads the reply (resolved from a JudgeConfig)."""

    template_name: str
    template_text: str
    parser: ScoreParser
    low: int
    high: int
    scale: int
    system_message: str | None
    model: str

    @property
    def template_sha256(self) -> str:
        """The sha256 of the template's text: which template judged, in the judge's record."""
        return hashlib.sha256(self.template_text.encode("utf-8")).hexdigest()

    def messages(self, question: str, response: str, reference: str) -> list[dict[str, str]]:
        """The chat messages for one (question, response, reference) triple."""
        prompt = fill_template(self.template_text, question=question, response=response, reference=reference)
        system = [{"role": "system", "content": self.system_message}] if self.system_message else []
        return [*system, {"role": "user", "content": prompt}]


def fill_template(template: str, *, question: str, response: str, reference: str) -> str:
    """Insert the three values, each stripped of surrounding whitespace (as the authors did), by name."""
    values = {"question": question.strip(), "response": response.strip(), "reference": reference.strip()}
    return _FIELD_RE.sub(lambda m: values[m.group(1)], template)


def read_template(path: Path) -> str:
    """A template file's text (UTF-8, exactly as stored); it must hold all three fields."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JudgeConfigError(f"Cannot read the judge template {path}: {exc}. Give a UTF-8 text file with "
                               "the fields {question}, {response} and {reference}.") from None
    missing = [f"{{{name}}}" for name in FIELDS if f"{{{name}}}" not in text]
    if missing:
        raise JudgeConfigError(f"The judge template {path} lacks the field(s) {', '.join(missing)}; a judge "
                               "template must contain {question}, {response} and {reference}.")
    return text


def _parse_range(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not match or int(match.group(1)) > int(match.group(2)):
        raise JudgeConfigError(f"The judge score range {text!r} is not LOW-HIGH with LOW <= HIGH (e.g. 1-10); "
                               f"set it with {how_to_set('score_range', '1-10')}.")
    return int(match.group(1)), int(match.group(2))


def judge_setup(config: JudgeConfig) -> JudgeSetup:
    """Resolve a configuration to the template, parser, range and model it means."""
    base = JUDGES[config.judge]  # resolve_config refused any other name
    if config.template is not None:
        path = Path(config.template).expanduser()
        name = path.name
    else:
        name = base.templates[config.language]
        path = templates_dir() / name
    parser_name = config.parser or base.parser
    if parser_name not in PARSERS:
        raise JudgeConfigError(f"Unknown judge parser {parser_name!r}: use one of {', '.join(PARSERS)}.")
    low, high = _parse_range(config.score_range) if config.score_range else base.ranges[config.language]
    if config.system_message is None:
        system = base.system_message
    else:
        system = None if config.system_message.strip().lower() in ("", "none") else config.system_message
    return JudgeSetup(
        template_name=name,
        template_text=read_template(path),
        parser=PARSERS[parser_name],
        low=low,
        high=high,
        scale=base.scale if config.score_scale is None else config.score_scale,
        system_message=system,
        model=config.model or base.default_model,
    )


def config_record(config: JudgeConfig, setup: JudgeSetup) -> JudgeRecord:
    """What results record about the judge, for reproducibility (no key, no full URL, no path)."""
    return JudgeRecord(
        judge=config.judge if config.template is None else f"custom ({config.judge} defaults)",
        model=setup.model,
        base_url_host=config.base_url_host(),
        template=setup.template_name,
        template_sha256=setup.template_sha256,
        language=config.language,
        parser=setup.parser.name,
        score_range=[setup.low, setup.high],
        score_scale=setup.scale,
        system_message=setup.system_message,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        seed=config.seed,
        reasks=config.reasks,
    )
