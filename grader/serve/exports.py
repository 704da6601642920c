"""The batch path's files, written from the server's data: ``results.json``, the gradebook CSV, the pages...

`write_exports` builds a `grader.models.GradingReport` of each student's final result (their latest
graded submission, manual scores and the late penalty applied) and hands it to the same report
writers ``grader grade --out DIR`` calls (``grader_submission_graded`` then ``grader_write_reports``),
so every export a batch writes is written here, from the same data. Nothing of a student's runs.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from sqlalchemy import select

from grader.serve.db import Submission, User
from grader.serve.state import ServerState

__all__ = ["class_results", "export_zip", "write_exports"]


def class_results(state: ServerState) -> list[Any]:
    """Each student's final result (`grader.serve.grades.final_result`), in login order; students never graded are left out."""
    from grader.serve.pushes import latest_final

    with state.db() as db:
        users = db.execute(select(User).where(User.role == "student").order_by(User.login)).scalars().all()
        results = []
        for user in users:
            result = latest_final(state, db, user)
            if result is not None:
                results.append(result)
        return results


def _exercises(config: Any, state: ServerState) -> tuple[Any, ...]:
    from grader.grading.session import CHECK_KINDS, check_kinds

    config.stash[CHECK_KINDS] = check_kinds(config)
    found = []
    for spec in sorted(state.pack.specs.glob("*.yaml")):
        exercise = config.hooks.load_exercise(path=str(spec), config=config)
        if exercise is not None:
            found.append(exercise)
    return tuple(found)


def write_exports(state: ServerState, out: Path) -> list[str]:
    """Write every report the batch path writes into ``out``; return the files' names (relative, sorted)."""
    from grader._version import __version__
    from grader.config.parser import for_command
    from grader.models import GradingReport

    pack = state.pack
    config = for_command("grade", [str(pack.starter), "--out", str(out), "-q"], pack=str(pack.root))
    config.hooks.configure(config)
    try:
        from grader.fileio import make_out_dir

        make_out_dir(out)
        results = class_results(state)
        for result in results:
            config.hooks.submission_graded(result=result, config=config)
        spec_hash = ""
        with state.db() as db:
            spec_hash = (
                db.execute(
                    select(Submission.spec_hash)
                    .where(Submission.spec_hash != "")
                    .order_by(Submission.id.desc())
                    .limit(1)
                ).scalar_one_or_none()
                or ""
            )
        report = GradingReport(
            grader_version=__version__,
            spec_hash=spec_hash,
            command="grade",
            submissions=tuple(results),
            exercises=_exercises(config, state),
        )
        config.hooks.write_reports(report=report, config=config)
    finally:
        config.hooks.unconfigure(config)
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def export_zip(state: ServerState) -> bytes:
    """`write_exports` into a temporary folder, zipped."""
    scratch = Path(tempfile.mkdtemp(prefix="grader-export-"))
    try:
        out = scratch / "reports"
        names = write_exports(state, out)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                archive.write(out / name, f"reports/{name}")
        return buffer.getvalue()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
