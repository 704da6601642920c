"""The naming rule for students (grader.intake.naming): verbatim ids, safe unique slugs, per-student archive errors."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import zipfile
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader.builtin.submission import locate
from grader.intake.archive import MAX_STUDENT_FILES
from grader.intake.naming import (
    MAX_SLUG_BYTES,
    assign_slugs,
    display_name,
    name_submissions,
    slug_base,
    unique_ids,
)
from grader.models import Submission

CORRECT = (SUBMISSIONS / "correct_numpy" / "attention.py").read_bytes()  # 86 / 86
MIB = (SUBMISSIONS / "mib_decimal" / "attention.py").read_bytes()  # 81 / 86
STARTER = (SUBMISSIONS / "starter" / "attention.py").read_bytes()  # 0 / 86


def _h8(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:8]


# --- the rule itself ----------------------------------------------------------------


def test_slugs_of_nasty_names() -> None:
    long = "é" * 120  # 240 bytes of UTF-8
    cases = {
        "alice": "alice",
        "a\u202eb": "ab",  # bidi override removed
        "tab\there": "tabhere",  # Cc removed
        "zero\u200bwidth": "zerowidth",  # Cf removed
        "eve\r\nforged,row": "eveforged_row",  # CR/LF removed, ',' replaced
        "../../etc": "_.._etc",
        "..": "student",
        ".hidden.": "hidden",
        "a/b\\c": "a_b_c",
        "-rf": "rf",
        "Jose\u0301": "José",  # NFD becomes NFC
        "con:aux?": "con_aux_",
        long: "é" * 27 + f"-{_h8(long.encode())}",  # cut to 54 bytes, then the hash
    }
    for sid, slug in cases.items():
        assert slug_base(sid) == slug, sid
        assert len(slug.encode()) <= MAX_SLUG_BYTES
        assert not re.search(r"[\x00-\x1f\x7f/\\\u202a-\u202e\u2066-\u2069]", slug)


def test_non_utf8_names_show_replacement_characters_and_keep_distinct_slugs() -> None:
    ff, fe = os.fsdecode(b"caf\xff"), os.fsdecode(b"caf\xfe")
    assert display_name(ff) == display_name(fe) == "caf\ufffd"
    subs = name_submissions([Submission(display_name(n), "", None, raw_name=os.fsencode(n)) for n in (ff, fe)])
    assert [s.id for s in subs] == ["caf\ufffd", "caf\ufffd-2"]
    assert [s.slug for s in subs] == [f"caf_-{_h8(b'caf' + bytes([0xFF]))}", f"caf_-2-{_h8(b'caf' + bytes([0xFE]))}"]


def test_reserved_names_case_and_collisions() -> None:
    ids = ["summary", "Index", "Ann", "ann", "ann-2", "CON", "results", "frank", "frank-2"]
    assert assign_slugs(ids) == [
        "summary-2",
        "Index-2",
        "Ann",
        "ann-3",
        "ann-2",
        "_CON",
        "results-2",
        "frank",
        "frank-2",
    ]
    # Windows device names are reserved whatever follows their first dot.
    assert assign_slugs(["aux.py", "Lpt1", "nul.tar.gz", "console"]) == ["_aux.py", "_Lpt1", "_nul.tar.gz", "console"]
    # NFC-equal names are two ids (two folders), with one slug base told apart.
    assert assign_slugs(["Jos\u00e9", "Jose\u0301"]) == ["José", "José-2"]


def test_colliding_ids_never_take_another_students_id() -> None:
    assert unique_ids(["frank", "frank-2", "frank"], ["", "", "frank.py"]) == ["frank", "frank-2", "frank.py"]
    assert unique_ids(["frank", "frank-2", "frank"], ["", "", ""]) == ["frank", "frank-2", "frank-3"]
    # An alternative that is another submission's id is not taken either.
    assert unique_ids(["bob", "bob", "bob.py"], ["", "bob.py", ""]) == ["bob", "bob-2", "bob.py"]


def test_listing_order_does_not_change_ids_or_slugs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("frank", "frank-2", "Ann", "ann", "zed"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "attention.py").write_bytes(b"x = 1\n")
    (tmp_path / "frank.py").write_bytes(b"x = 2\n")
    first = name_submissions(locate(str(tmp_path)))
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: list(reversed(real(p))))
    again = name_submissions(locate(str(tmp_path)))
    assert (
        [(s.id, s.slug) for s in first]
        == [(s.id, s.slug) for s in again]
        == [
            ("Ann", "Ann"),
            ("ann", "ann-2"),
            ("frank", "frank"),
            ("frank-2", "frank-2"),
            ("frank.py", "frank.py"),
            ("zed", "zed"),
        ]
    )


# --- whole batches ----------------------------------------------------------------------


def _grade(cli, *paths: Path, out: Path, extra: tuple[str, ...] = ()) -> dict:
    code, _, err = cli("grade", *paths, "--out", out, "-q", "--insecure", "--jobs", "2", *extra)
    assert code == 0, err
    return {s["id"]: s for s in json.loads((out / "results.json").read_text(encoding="utf-8"))["submissions"]}


def _total(page: Path) -> str:
    return re.search(r'<span class="big" id="total">([^<]*)</span>', page.read_text(encoding="utf-8")).group(1)


def test_frank_frank2_and_frank_py_are_three_students(cli, tmp_path: Path) -> None:
    cls = tmp_path / "class"
    for name, source in (("frank", CORRECT), ("frank-2", STARTER)):
        (cls / name).mkdir(parents=True)
        (cls / name / "attention.py").write_bytes(source)
    (cls / "frank.py").write_bytes(MIB)
    out = tmp_path / "out"
    results = _grade(cli, cls, out=out)
    assert {sid: (s["slug"], s["score"]) for sid, s in results.items()} == {
        "frank": ("frank", 86.0),
        "frank-2": ("frank-2", 0.0),
        "frank.py": ("frank.py", 81.0),
    }
    assert results["frank.py"]["path"] == str(cls / "frank.py")
    for slug, total in (("frank", "86 / 86"), ("frank-2", "0 / 86"), ("frank.py", "81 / 86")):
        assert _total(out / f"{slug}.html") == total
        assert json.loads((out / "gradescope" / f"{slug}.json").read_text())["score"] == float(total.split()[0])
    index = (out / "index.html").read_text()
    for slug in ("frank", "frank-2", "frank.py"):
        assert f'<a href="{slug}.html">{slug}</a>' in index


def test_a_student_named_like_a_class_page_keeps_both_pages(cli, tmp_path: Path) -> None:
    cls = tmp_path / "class"
    for name, source in (("summary", CORRECT), ("index", MIB), ("Ann", CORRECT), ("ann", STARTER)):
        (cls / name).mkdir(parents=True)
        (cls / name / "attention.py").write_bytes(source)
    out = tmp_path / "out"
    results = _grade(cli, cls, out=out)
    assert {sid: s["slug"] for sid, s in results.items()} == {
        "Ann": "Ann",
        "ann": "ann-2",
        "index": "index-2",
        "summary": "summary-2",
    }
    assert "Chapter G14: class summary" in (out / "summary.html").read_text()
    assert "Chapter G14: class results" in (out / "index.html").read_text()
    assert _total(out / "summary-2.html") == "86 / 86" and _total(out / "index-2.html") == "81 / 86"
    assert _total(out / "Ann.html") == "86 / 86" and _total(out / "ann-2.html") == "0 / 86"
    # No two files differ only by case (they would be one file on macOS and Windows).
    names = [p.name for p in out.iterdir()] + [p.name for p in (out / "gradescope").iterdir()]
    assert len({n.casefold() for n in names}) == len(names)


def test_odd_folder_names_are_graded_each_on_its_own_page(cli, tmp_path: Path) -> None:
    cls = tmp_path / "class"
    cls.mkdir()
    long = "x" * 240
    names = {
        os.fsencode(long): CORRECT,
        b"caf\xff": CORRECT,
        b"caf\xfe": STARTER,
        b"eve\r\nforged": MIB,
        "bidi\u202egpj.exe".encode(): CORRECT,
        b"bob": CORRECT,
    }
    for raw, source in names.items():
        os.mkdir(os.path.join(os.fsencode(cls), raw))
        with open(os.path.join(os.fsencode(cls), raw, b"attention.py"), "wb") as fh:
            fh.write(source)
    (cls / "bob.py").write_bytes(STARTER)  # a file beside a folder of the same name
    out = tmp_path / "out"
    results = _grade(cli, cls, out=out)
    want = {
        "bob": ("bob", 86.0),
        "bob.py": ("bob.py", 0.0),
        "bidi\u202egpj.exe": ("bidigpj.exe", 86.0),
        "caf\ufffd": (f"caf_-{_h8(b'caf' + bytes([0xFE]))}", 0.0),  # b"caf\xfe" sorts first
        "caf\ufffd-2": (f"caf_-2-{_h8(b'caf' + bytes([0xFF]))}", 86.0),
        "eve\r\nforged": ("eveforged", 81.0),
        long: ("x" * 55 + f"-{_h8(long.encode())}", 86.0),
    }
    assert {sid: (s["slug"], s["score"]) for sid, s in results.items()} == want
    for slug, score in want.values():
        assert _total(out / f"{slug}.html") == f"{score:g} / 86"
        assert (out / "gradescope" / f"{slug}.json").is_file()
    # Every file the batch wrote has a name that is valid UTF-8 and free of control characters.
    for path in out.rglob("*"):
        assert path.name.encode("utf-8") and not re.search(r"[\x00-\x1f\u202e]", path.name)


def _zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicate name
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


@pytest.mark.slow
def test_an_archive_with_a_huge_folder_and_a_duplicate_costs_only_those_students(cli, tmp_path: Path) -> None:
    long = "y" * 300  # longer than a file name may be (255 bytes)
    members = [("export/honest/attention.py", CORRECT)]
    members += [(f"export/hoarder/data/{i}.txt", b"") for i in range(20_000)]
    members += [("export/hoarder/attention.py", CORRECT)]
    members += [("export/twice/attention.py", CORRECT), ("export/twice/attention.py", STARTER)]
    members += [(f"export/{long}/attention.py", MIB), ("export/summary.py", CORRECT)]
    archive = _zip(tmp_path / "class.zip", members)
    out = tmp_path / "out"
    results = _grade(cli, archive, out=out)
    assert set(results) == {"honest", "hoarder", "twice", long, "summary"}
    assert results["honest"]["status"] == "graded" and results["honest"]["score"] == 86.0
    assert results["hoarder"]["status"] == "error" and results["hoarder"]["score"] == 0
    assert results["hoarder"]["error"] == (
        f"your folder hoarder in {archive} holds 20,001 files; the grader reads at most "
        f"{MAX_STUDENT_FILES:,} per student: send attention.py without the rest"
    )
    assert results["twice"]["error"] == (
        f"attention.py appears twice in {archive} (export/twice/attention.py); neither was graded: "
        "export the submissions again with one file per student"
    )
    assert results[long]["score"] == 81.0 and results[long]["slug"] == "y" * 55 + f"-{_h8(long.encode())}"
    assert results["summary"]["score"] == 86.0 and results["summary"]["slug"] == "summary-2"
    assert _total(out / "summary-2.html") == "86 / 86"
    assert "Chapter G14: class summary" in (out / "summary.html").read_text()
    for sid, sub in results.items():
        assert (out / f"{sub['slug']}.html").is_file(), sid


def test_special_files_named_like_the_submission_are_reported_not_opened(cli, tmp_path: Path) -> None:
    cls = tmp_path / "class"
    (cls / "fifo").mkdir(parents=True)
    os.mkfifo(cls / "fifo" / "attention.py")
    os.mkfifo(cls / "piped.py")
    (cls / "honest").mkdir()
    (cls / "honest" / "attention.py").write_bytes(CORRECT)
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("opening a FIFO blocked the grader"))
    signal.alarm(60)
    try:
        results = _grade(cli, cls, out=tmp_path / "out")
    finally:
        signal.alarm(0)
    assert results["fifo"]["error"] == "attention.py is not a regular file (a FIFO); submit the file itself"
    assert results["piped"]["error"] == "piped.py is not a regular file (a FIFO); submit the file itself"
    assert results["honest"]["score"] == 86.0
    # A single folder whose attention.py is a FIFO, given directly.
    subs = locate(str(cls / "fifo"))
    assert [s.problem for s in subs] == ["attention.py is not a regular file (a FIFO); submit the file itself"]


def test_writers_agree_on_slugs_when_results_carry_none() -> None:
    from grader.builtin.gradescope import file_names
    from grader.builtin.html_report import page_names
    from grader.builtin.json_report import report_json
    from grader.models import GradingReport, SubmissionResult

    subs = tuple(SubmissionResult(sid, "", "", "graded", 0.0, 0.0, ()) for sid in ("Ann", "ann", "index"))
    report = GradingReport("0.1.0", "x", "grade", subs)
    assert page_names(report) == {"Ann": "Ann.html", "ann": "ann-2.html", "index": "index-2.html"}
    assert file_names(report) == {"Ann": "Ann.json", "ann": "ann-2.json", "index": "index-2.json"}
    assert [s["slug"] for s in json.loads(report_json(report))["submissions"]] == ["Ann", "ann-2", "index-2"]


def test_an_archive_that_is_one_students_file_is_named_after_the_archive(cli, tmp_path: Path) -> None:
    archive = _zip(tmp_path / "Zoë Smith.zip", [("attention.py", CORRECT), ("notes.txt", b"hi")])
    results = _grade(cli, archive, out=tmp_path / "out")
    assert {sid: (s["slug"], s["score"]) for sid, s in results.items()} == {"Zoë Smith": ("Zoë_Smith", 86.0)}
    assert results["Zoë Smith"]["path"] == f"{archive}:Zoë Smith"


def test_special_and_linked_archive_members_are_their_students_errors(tmp_path: Path) -> None:
    from grader.intake.archive import safe_extract

    with zipfile.ZipFile(tmp_path / "c.zip", "w") as zf:
        fifo = zipfile.ZipInfo("export/pipe/attention.py")
        fifo.external_attr = 0o010644 << 16
        zf.writestr(fifo, b"")
        link = zipfile.ZipInfo("export/linked/attention.py")
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr("export/ok/attention.py", b"x = 1\n")
    dest = tmp_path / "x"
    dest.mkdir()
    extracted = safe_extract(tmp_path / "c.zip", dest, "attention.py")
    assert [(s.name, s.problem) for s in extracted.students] == [
        ("linked", f"attention.py was left out of {tmp_path / 'c.zip'}: it is a symbolic link"),
        ("ok", ""),
        ("pipe", f"attention.py was left out of {tmp_path / 'c.zip'}: it is not a regular file (a FIFO)"),
    ]
    assert extracted.students[1].file.read_bytes() == b"x = 1\n"
    assert [p.relative_to(dest).as_posix() for p in sorted(dest.rglob("*"))] == ["00001", "00001/attention.py"]


def test_only_a_whole_archive_over_the_member_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.intake.archive
    from grader.intake.archive import ArchiveError, safe_extract

    archive = _zip(tmp_path / "c.zip", [(f"s{i}\\attention.py", b"x = 1\n") for i in range(6)])
    dest = tmp_path / "x"
    dest.mkdir()
    assert [(s.name, s.problem) for s in safe_extract(archive, dest, "attention.py").students] == [
        (f"s{i}", "") for i in range(6)
    ]
    monkeypatch.setattr(grader.intake.archive, "MAX_MEMBERS", 5)
    with pytest.raises(ArchiveError, match=r"c\.zip: 6 members; an archive may list at most 5$"):
        safe_extract(archive, tmp_path / "y", "attention.py")


def test_resolves_to_is_resolve_without_resolving_every_entry(tmp_path: Path) -> None:
    """`resolves_to` answers as ``(folder / name).resolve() == target`` (issue 29: a class folder's entries are
    not each resolved to find the output folder): a plain entry, a link to the target, a link elsewhere, a
    link through a linked folder, and a name that is not there."""
    from grader.intake.files import resolves_to

    real = tmp_path / "real"
    (real / "class" / "out").mkdir(parents=True)
    (real / "class" / "alice").mkdir()
    (tmp_path / "elsewhere").mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(real / "class")  # the folder listed is itself reached through a link
    (real / "class" / "to-out").symlink_to(real / "class" / "out")
    (real / "class" / "to-elsewhere").symlink_to(tmp_path / "elsewhere")
    target = (real / "class" / "out").resolve()
    for folder in (real / "class", linked):
        for name in ("out", "alice", "to-out", "to-elsewhere", "missing"):
            expected = (folder / name).resolve() == target
            assert resolves_to(folder, name, target, folder.resolve()) is expected, (folder, name)
    assert resolves_to(linked, "out", target, linked.resolve()) and resolves_to(
        linked, "to-out", target, linked.resolve()
    )
    assert not resolves_to(linked, "alice", target, linked.resolve())
