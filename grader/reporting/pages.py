"""The HTML pages' templates: one jinja2 environment for every page a plugin renders.

Templates live in ``grader/templates`` (``*.html``, autoescape on, self-contained: inline CSS, no
scripts, no network assets). The per-submission pages, the class index and the summary page are
rendered from this environment; what a page shows of a check that is not shown follows
`grader.disclosure` (its ``message_shown`` and ``hidden_note`` globals).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

from grader.disclosure import HIDDEN_NOTE, message_shown
from grader.reporting.feedback import (
    check_mistake,
    exercise_mistake,
    headline,
    hint_for,
    how_many,
    mistake_example,
    not_attempted,
)
from grader.safetext import display

__all__ = ["STATUS_LABELS", "TEMPLATES", "environment"]

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
"""The templates' folder."""

STATUS_LABELS = {
    "passed": "Passed",
    "failed": "Failed",
    "error": "Error",
    "timeout": "Timed out",
    "not_attempted": "Not attempted",
}
"""Words for each check status on a page."""


def environment(pack: Any) -> jinja2.Environment:
    """The jinja2 environment of the report templates (autoescape on).

    ``pack`` (the run's course, `grader.packs.Pack`) is the templates' ``course``: its ``chapter``,
    ``title`` and ``submission`` file name head every page.
    """
    import jinja2  # here, not at the top: a command that writes no page ('grader check') never imports it

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.globals["status_label"] = lambda s: STATUS_LABELS.get(s, s)
    # grader.disclosure: the one rule of what a student reads, on the page as in every export.
    env.globals["message_shown"] = message_shown
    env.globals["hidden_note"] = HIDDEN_NOTE
    # grader.reporting.feedback: one likely mistake per exercise, hints chosen by what failed (as on the terminal).
    env.globals["exercise_mistake"] = exercise_mistake
    env.globals["mistake_example"] = mistake_example
    env.globals["check_mistake"] = check_mistake
    env.globals["hint_for"] = hint_for
    env.globals["headline"] = headline
    env.globals["how_many"] = how_many
    env.globals["not_attempted"] = not_attempted
    env.filters["points"] = lambda x: f"{x:g}"
    env.filters["percent"] = lambda s: f"{100.0 * s.score / s.max_score:.0f}%" if s.max_score else "-"
    # Student text without control, escape or bidi characters (safetext.display); autoescape still applies.
    env.filters["plain"] = display
    env.filters["plain_lines"] = lambda text: display(text, newlines=True)
    env.globals["course"] = pack
    env.globals["exercise_section"] = _sections(env)
    return env


def _bytecode_cache() -> Any:
    """Where compiled templates are kept between runs: ``grader/templates/__pycache__``, as Python keeps
    its own. Compiling them costs about 60 ms a run. Best effort: a folder that cannot be written
    (a read-only install) compiles every time; jinja2 checks each entry against its template's source,
    and each jinja2 release has entries of its own."""
    import jinja2

    class Kept(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # noqa: BLE001 - an entry cut short (a full disk): compiled again, rewritten whole
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    folder = TEMPLATES / "__pycache__"
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    # jinja2 marks an entry with its own bytecode format and Python's version, not its release: the
    # code a release compiles calls that release's runtime, so each release keeps entries of its own
    # (as Python's cpython-311 and cpython-312 files sit side by side).
    version = jinja2.__version__.replace("%", "%%")
    return Kept(str(folder), pattern=f"__jinja2-{version}_%s.cache")


def _sections(env: Any) -> Any:
    """``exercise_section(ex)``: one exercise's part of a submission's page, rendered once per distinct result.

    A class of correct (or alike) submissions has the same exercise results
    again and again (`grader.grading.session.shared` keeps them once); their HTML is
    the same too. Up to 256 are kept, as ``Markup`` (already escaped).
    """
    import functools

    template = env.get_template("_exercise.html")

    from markupsafe import Markup

    @functools.lru_cache(maxsize=256)
    def kept(ex: Any) -> Any:
        return Markup(template.render(ex=ex))

    def exercise_section(ex: Any) -> Any:
        try:
            return kept(ex)
        except TypeError:  # an unhashable field (a plugin's list in details): rendered each time
            return Markup(template.render(ex=ex))

    return exercise_section
