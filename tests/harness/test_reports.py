"""The JSON results file and the HTML pages (json_report, html_report)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import SUBMISSIONS, chromium_page, run_chromium

from grader.packs import find_pack

CHECK_KEYS = ["id", "status", "score", "max_score", "visibility", "message"]


def test_json_results_shape(graded: dict) -> None:
    results = graded["results"]
    # "course": the pack's id; "misconceptions": what to reteach (issue 27, grader/reporting/insight.py)
    assert list(results) == ["grader_version", "spec_hash", "course", "submissions", "misconceptions"]
    assert results["course"] == "g14"
    assert results["grader_version"] == "0.1.0"
    assert re.fullmatch(r"[0-9a-f]{64}", results["spec_hash"])
    for sub in results["submissions"]:
        assert list(sub) == ["id", "slug", "path", "sha256", "score", "max_score", "status", "error", "exercises"]
        assert sub["status"] in ("graded", "error")
        assert [e["id"] for e in sub["exercises"]] == ["G14.01", "G14.02", "G14.03", "G14.04", "G14.05", "G14.06"]
        for ex in sub["exercises"]:
            assert ex["score"] == sum(c["score"] for c in ex["checks"])
            for check in ex["checks"]:
                # "diagnosis" is there only when a failing result matches a catalogued mistake
                assert list(check) == (CHECK_KEYS + ["diagnosis"] if "diagnosis" in check else CHECK_KEYS)
                for d in check.get("diagnosis", []):
                    assert check["status"] == "failed" and d["misconception"] and d["section"] and d["mistake"]
                assert check["status"] in ("passed", "failed", "error", "timeout", "not_attempted")
                assert check["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    numpy = graded["by_id"]["correct_numpy"]
    assert numpy["path"] == "submissions/correct_numpy"
    import hashlib

    assert numpy["sha256"] == hashlib.sha256((SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes()).hexdigest()


@pytest.mark.slow
def test_same_inputs_give_the_same_bytes(cli, tmp_path: Path) -> None:
    paths = [SUBMISSIONS / n for n in ("correct_lists", "no_sqrt_dk", "syntax_error", "starter")]
    for run in ("a", "b"):
        code, _, _ = cli("grade", *paths, "--out", tmp_path / run, "-q")
        assert code == 0
    for name in ("results.json", "index.html", "no_sqrt_dk.html", "syntax_error.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_json_flag_writes_elsewhere(cli, tmp_path: Path) -> None:
    code, _, _ = cli("grade", SUBMISSIONS / "mib_decimal", "--out", tmp_path / "o", "--json", tmp_path / "r.json", "-q")
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["submissions"][0]["score"] == 81.0
    assert not (tmp_path / "o" / "results.json").exists()


def test_index_links_every_page(graded: dict) -> None:
    index = (graded["out"] / "index.html").read_text()
    for sid in graded["by_id"]:
        assert f'<a href="{sid}.html">{sid}</a>' in index
        assert (graded["out"] / f"{sid}.html").is_file()


def test_pages_are_self_contained(graded: dict) -> None:
    for page in graded["out"].glob("*.html"):
        html = page.read_text()
        assert "<script" not in html
        assert "http://" not in html and "https://" not in html
        assert "<style>" in html


def test_visible_failure_shows_call_expected_and_got(graded: dict) -> None:
    """Under an exercise's likely mistake, one check is shown whole (the shortest call), the others one line each."""
    html = (graded["out"] / "unnormalized_scores.html").read_text()
    section = html[html.index('id="G14.02"') :]
    section = section[: section.index("</section>")]
    assert (
        section.count('<p class="diagnosis">') == 1
        and "Likely mistake (all 5 failing checks fail as it does)" in section
    )
    brief = section[section.index('<span class="name">zero-scores</span>') :]
    brief = brief[: brief.index('<div class="check')]
    assert "outputs differs from the expected value by up to 5 (at outputs[0][0])" in brief
    assert "<dl" not in brief and "Hint:" not in brief
    block = section[section.index("log3-scores</span>") :]
    block = block[: block.index('<div class="check')]
    assert "outputs differs from the expected value by up to 1.30278 (at outputs[0][0])" in block
    assert "<dt>call</dt><dd><pre>attention(Q=[[1.0]], K=[[1.098612289], [0.0]], V=[[2.0], [8.0]])</pre></dd>" in block
    assert "<dt>expected</dt><dd><pre>[[3.5]]</pre></dd>" in block
    assert "<dt>got</dt><dd><pre>[[2.197224577]]</pre></dd>" in block
    assert "Hint:" not in block  # the likely mistake says what to change


def test_hidden_descriptions_are_not_shown(graded: dict) -> None:
    """Descriptions may state inputs or answers ("... is 240,000 bytes"): hidden checks show none."""
    html = (graded["out"] / "mib_decimal.html").read_text()
    assert "itemsize</span>" in html
    assert "240,000" not in html and "268,435,456" not in html
    assert "67,108,864 bytes" in html  # the visible bytes-n1024 check keeps its description


def test_hidden_failure_shows_only_name_status_and_hint(graded: dict) -> None:
    html = (graded["out"] / "no_sqrt_dk.html").read_text()
    section = html[html.index('id="G14.01"') :]
    section = section[: section.index("</section>")]
    assert "The scores are Q K^T without the 1/sqrt(d_k) scale" in section  # the exercise's likely mistake
    block = section[section.index("unequal-counts-and-widths</span>") :]
    block = block[: block.index('<div class="check')] if '<div class="check' in block else block
    assert '<span class="pill failed">Failed</span>' in html
    assert "Hidden check: its inputs and expected values are not shown." in block
    assert "<dl" not in block and "differs" not in block and "largest error" not in block
    assert "Hint:" not in block  # the likely mistake explains it: no hint written for another cause


@pytest.mark.slow
def test_after_due_date_details_follow_the_option(cli, tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    shutil.copytree("exercises", specs)
    spec = specs / "G14.05.yaml"
    spec.write_text(
        spec.read_text().replace("  - id: mib-n2048\n", "  - id: mib-n2048\n    visibility: after_due_date\n")
    )
    for flag, shown in (([], False), (["--after-due-date"], True)):
        out = tmp_path / f"out{len(flag)}"
        code, _, err = cli(
            "grade", SUBMISSIONS / "mib_decimal", "--specs", specs, "--out", out, "-q", "--no-diagnosis", *flag
        )
        assert code == 0, err
        html = (out / "mib_decimal.html").read_text()
        block = html[html.index("mib-n2048</span>") :]
        block = block[: block.index('<div class="check')]
        assert ("<dt>expected</dt><dd><pre>256.0</pre></dd>" in block) is shown


def test_student_text_is_escaped(cli, tmp_path: Path) -> None:
    evil = tmp_path / "<b>evil&"
    evil.mkdir()
    (evil / "attention.py").write_text(
        "print('<script>alert(1)</script>')\n"
        "def softmax(scores, allowed=None):\n"
        "    raise ValueError('<img src=x onerror=alert(2)>')\n"
    )
    code, _, _ = cli("grade", evil, "--out", tmp_path / "out", "-q")
    assert code == 0
    pages = {p.name: p.read_text() for p in (tmp_path / "out").glob("*.html")}
    assert set(pages) == {"index.html", "_b_evil_.html", "summary.html"}
    page = pages["_b_evil_.html"]
    assert "<script>" not in page and "<img" not in page and "<b>evil" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;b&gt;evil&amp;" in pages["index.html"]


def test_syntax_error_page_explains_and_has_no_traceback(graded: dict) -> None:
    html = (graded["out"] / "syntax_error.html").read_text()
    assert "Your file could not be graded." in html
    assert "importing the file failed with SyntaxError (attention.py, line 20): expected &#39;:&#39;" in html
    assert "Traceback" not in html


@pytest.mark.browser
def test_every_page_fits_a_phone_screen(graded: dict) -> None:
    """At a phone's 390 px no page scrolls sideways: long check ids wrap, a wide table scrolls inside itself."""
    pages = sorted(graded["out"].glob("*.html"))
    assert len(pages) > 10
    wider = {}
    with chromium_page(390, 900) as page:
        for path in pages:
            page.goto(path.as_uri())
            wider[path.name] = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
    assert {name: px for name, px in wider.items() if px > 0} == {}


def test_chromium_renders_a_report(graded: dict) -> None:
    """Headless Chromium (Debian's chromium, installed by .ci/run) renders the page."""
    dom = run_chromium("--dump-dom", (graded["out"] / "mask_after_softmax.html").as_uri()).stdout
    assert '<span class="big" id="total">65 / 86</span>' in dom
    assert dom.count('class="pill failed"') == 13
    assert "Chapter section: Mask before normalization" in dom


def test_bidi_and_control_characters_in_ids_are_neutralised_on_pages() -> None:
    from grader.builtin.html_report import environment, render_index, render_submission
    from grader.models import (
        CheckResult,
        ExerciseResult,
        GradingReport,
        SubmissionResult,
    )

    sid = "eve\u202egnp.exe\x1b]0;pwn\x07\x1b[2J<b>"
    check = CheckResult(
        "c1", "", "error", 0.0, 1.0, "visible", "raised \u2066x\u2069\x1b[31m", "h", True, (("got", "a\x1b[2Jb\nc"),)
    )
    sub = SubmissionResult(
        sid,
        "p",
        "",
        "graded",
        0.0,
        1.0,
        (ExerciseResult("E1", "t", "s", 0.0, 1.0, (check,)),),
        stdout="out\x1b]0;t\x07put\u202e\n",
    )
    report = GradingReport("0", "h", "grade", (sub,))
    env = environment(find_pack())
    page = render_submission(env, report, sub)
    for bad in ("\u202e", "\u2066", "\x1b", "\x07", "<b>"):
        assert bad not in page, repr(bad)
    assert "<title>G14 feedback: evegnp.exe&lt;b&gt;</title>" in page
    assert "<h1>Chapter G14 feedback: evegnp.exe&lt;b&gt;</h1>" in page
    assert '<p class="msg">raised x</p>' in page and "<pre>ab\nc</pre>" in page and "<pre>output\n</pre>" in page
    index = render_index(env, report, {sid: "eve.html"})
    assert '<a href="eve.html">evegnp.exe&lt;b&gt;</a>' in index
    assert "\u202e" not in index and "\x1b" not in index


def test_compiled_templates_are_kept_between_runs_and_a_read_only_folder_still_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grader/templates/__pycache__ keeps jinja2's compiled templates: a second run compiles nothing;
    where that folder cannot be made (here a file is in its way), templates compile as before."""
    import shutil

    import grader.reporting.pages as pages

    folder = tmp_path / "templates"
    shutil.copytree(pages.TEMPLATES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pages, "TEMPLATES", folder)
    first = pages.environment(find_pack())
    first.get_template("index.html")
    assert sorted(p.suffix for p in (folder / "__pycache__").iterdir()) == [".cache"] * 2  # index and its _exercise
    second = pages.environment(find_pack())

    def compiled_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kept template was compiled again")

    monkeypatch.setattr(second, "compile", compiled_again)
    assert second.get_template("index.html").render is not None

    shutil.rmtree(folder / "__pycache__")
    (folder / "__pycache__").write_text("not a folder")
    assert pages._bytecode_cache() is None
    assert pages.environment(find_pack()).get_template("index.html").render is not None


def test_a_damaged_compiled_template_is_compiled_again_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry of grader/templates/__pycache__ cut short (a full disk, a copy interrupted) made every
    later run end in an internal error (jinja2's unpickling of its checksum raised): it is compiled
    again, and the entry rewritten whole."""
    from jinja2.bccache import bc_magic

    import grader.reporting.pages as pages

    folder = tmp_path / "templates"
    shutil.copytree(pages.TEMPLATES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pages, "TEMPLATES", folder)
    pages.environment(find_pack()).get_template("index.html")
    entries = sorted((folder / "__pycache__").iterdir())
    whole = [p.read_bytes() for p in entries]
    for entry, data in zip(entries, whole):
        entry.write_bytes(data[: len(bc_magic) + 3])  # jinja2's magic, then a few bytes of its pickled checksum
    template = pages.environment(find_pack()).get_template("index.html")
    assert template.name == "index.html" and callable(template.root_render_func)
    assert [p.read_bytes() for p in entries] == whole


def test_compiled_templates_are_kept_per_jinja2_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgraded jinja2 never loads the templates an older release compiled: jinja2 marks its entries
    with its bytecode format and Python's version only, so each release has entries of its own."""
    import jinja2

    import grader.reporting.pages as pages

    folder = tmp_path / "templates"
    shutil.copytree(pages.TEMPLATES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pages, "TEMPLATES", folder)
    pages.environment(find_pack()).get_template("index.html")
    mine = sorted(p.name for p in (folder / "__pycache__").iterdir())
    assert len(mine) == 2 and all(name.startswith(f"__jinja2-{jinja2.__version__}_") for name in mine)
    monkeypatch.setattr(jinja2, "__version__", "9.9.9%s")
    upgraded = pages.environment(find_pack())
    compiled: list[str] = []
    real = upgraded.compile

    def counted(source: str, name: str | None = None, *args: object, **kwargs: object) -> object:
        compiled.append(str(name))
        return real(source, name, *args, **kwargs)

    monkeypatch.setattr(upgraded, "compile", counted)
    upgraded.get_template("index.html")
    assert "index.html" in compiled  # not loaded from the older release's entry
    added = [p.name for p in (folder / "__pycache__").iterdir() if p.name not in mine]
    assert added and all(name.startswith("__jinja2-9.9.9%s_") for name in added)


def test_a_page_filled_in_from_a_kept_page_is_the_page_rendered_whole() -> None:
    """`_Pages` renders a page once per distinct result and puts each student's id and file hash into it
    (issue 29): every page is the one `render_submission` makes, whatever the id (markup, escapes, bidi,
    a random-looking token), the hash, the status, the printed output or the adjustments."""
    import dataclasses

    from grader.builtin.html_report import _Pages, environment, render_submission
    from grader.models import Adjustment, CheckResult, ExerciseResult, GradingReport, SubmissionResult

    check = CheckResult("c1", "", "failed", 0.0, 1.0, "visible", "wrong <i>", "h", True, (("got", "1"),))
    passed = CheckResult("c2", "d", "passed", 1.0, 1.0, "hidden", "", "", False)
    listed = dataclasses.replace(check, id="c3", details=[("got", "2")])  # type: ignore[arg-type]
    plain = (ExerciseResult("E1", "t", "s", 1.0, 2.0, (check, passed)),)
    unhashable = (ExerciseResult("E1", "t", "s", 0.0, 1.0, (listed,)),)
    report = GradingReport("0", "h" * 64, "grade", ())
    env = environment(find_pack())
    pages = _Pages(env, report)
    ids = ["alice", "eve\u202egnp.exe\x1b]0;pwn\x07<b>&\"'", "zoë", "tab\there", "x" * 600, pages.id_token, "id"]
    late = (Adjustment("late", -0.5, "1 day <late>"),)
    for exercises in (plain, unhashable):
        for extra in (
            {},
            {"stdout": "hi <b>\n", "stderr": "warn\x1b[2J"},
            {"status": "error", "error": "SyntaxError <x>"},
            {"raw_score": 1.0, "adjustments": late, "score": 0.5},
            # equal keys but for the sign of a zero: a page shows "-0" for one and "+0" for the other
            {"raw_score": 1.0, "adjustments": (Adjustment("late", -0.0, "on time"),), "score": 1.0},
            {"raw_score": 1.0, "adjustments": (Adjustment("late", 0.0, "on time"),), "score": 1.0},
            {"lms": {"file": "a.py", "intake": "a.py, b.py"}},
        ):
            for sid in ids:
                for sha in ("", "ab" * 32, pages.sha_token + "0" * 52, '<>&"' * 16):
                    sub = SubmissionResult(sid, "p", sha, "graded", 1.0, 2.0, exercises, slug="s")
                    sub = dataclasses.replace(sub, **extra)
                    assert pages(sub) == render_submission(env, report, sub), (sid, sha, extra)
    assert 0 < len(pages.kept) <= 2 * 7 * 2


def test_results_spool_gives_back_each_line_whatever_the_order_of_writes_and_reads() -> None:
    """The spool of results.json's lines writes each line after the last without seeking (issue 29); a line
    written after one was read still goes to the end, and every line reads back as written."""
    from grader.builtin.json_report import _Spool

    spool = _Spool()
    try:
        lines = {f"s{i}": f'{{"id": "s{i}", "x": "{"é" * i}"}}' for i in range(5)}
        for sid in ("s0", "s1", "s2"):
            spool.put(sid, lines[sid])
        assert spool.get("s1") == lines["s1"]
        spool.put("s3", lines["s3"])  # after a read: appended, not written over s2
        assert [spool.get(sid) for sid in ("s0", "s1", "s2", "s3")] == [lines[s] for s in ("s0", "s1", "s2", "s3")]
        spool.put("s4", lines["s4"])
        assert spool.get("s4") == lines["s4"] and spool.get("s2") == lines["s2"]
        assert spool.get("nobody") is None
    finally:
        spool.close()
