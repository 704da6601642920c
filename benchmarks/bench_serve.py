"""Benchmark: many students submitting to ``grader serve`` at once; time from upload to visible feedback.

Usage (from the repository root, with the package and its ``serve`` extra installed)::

    python benchmarks/bench_serve.py --students 200 --minutes 2
    python benchmarks/bench_serve.py --quick          # 12 students over 15 s

It copies the course (``course.yaml``, ``exercises/``, ``reference/``) to a temporary folder, starts
the real server there (``grader serve --course COPY --workers N``, SQLite beside the copy unless
``--db`` names another database), and makes one-time login links for ``--students`` students
(``grader serve invite``). The students arrive at random times spread over ``--minutes`` (seeded:
the same arrivals every run); each is an ``httpx.AsyncClient`` with its own cookies that signs in
by its link, uploads one of the course's samples (correct and buggy ones, in turn), and reads its
submission's page as a browser does: again after the page's own ``refresh`` delay (``--poll``
overrides it) until the feedback is there. For each submission it measures the time from the start
of the upload to the first page showing the feedback.

The server's per-address rate limit is lifted in the copy's ``serve.yaml`` (every simulated student
comes from 127.0.0.1, where real students have addresses of their own); the per-user limit and
everything else stay as they are.

It prints the number of students and submissions, the latency's p50, p95 and max, the request
errors (a status other than the expected one, or a failed connection), the submissions not graded,
the throughput, the CPU seconds the server and its workers used, the load average before and after,
and the command that reproduces it. Exit code: 0 when every submission was graded, with no request
error and a p95 within ``--target`` seconds (default 5); 1 otherwise. ``--json FILE`` also writes the
figures as JSON (tests/serve/test_bench_serve.py reads them).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = (
    "correct_numpy",
    "no_sqrt_dk",
    "correct_lists",
    "mask_after_softmax",
    "unnormalized_scores",
    "masked_row_nan",
)
"""The samples students upload, in turn: correct and buggy ones (never ``hangs``: it waits out its time limit)."""

WARMUP = "warmup-"
"""The login prefix of the warm-up users (one submission per worker before the students arrive)."""
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
REFRESH = re.compile(r'<meta http-equiv="refresh" content="(\d+)')
FEEDBACK = re.compile(r"(?:Visible checks|Final score): ([\d.]+) / ([\d.]+)|could not be graded")


@dataclasses.dataclass
class Figures:
    """What a run measured."""

    students: int
    submissions: int = 0
    latencies: list[float] = dataclasses.field(default_factory=list)
    arrived: list[float] = dataclasses.field(default_factory=list)
    """Seconds after the first arrival window opened at which each latency's upload began (same order)."""
    errors: list[str] = dataclasses.field(default_factory=list)
    not_graded: int = 0
    wrong: list[str] = dataclasses.field(default_factory=list)
    """Feedback that does not fit its sample: a correct one without full marks, a buggy one with them."""
    queued: list[float] = dataclasses.field(default_factory=list)
    grading: list[float] = dataclasses.field(default_factory=list)
    wall: float = 0.0
    ready: float = 0.0
    """Seconds from starting the server to the warm-up submissions' feedback (one per worker)."""
    server_cpu: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def percentile(self, q: float, values: list[float] | None = None) -> float:
        """The ``q`` quantile (0..1) of the latencies (or of ``values``), nearest rank; 0 without any."""
        ordered = sorted(self.latencies if values is None else values)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_course(folder: Path) -> Path:
    """The course copied into ``folder``, with a ``serve.yaml`` lifting the per-address rate limit."""
    course = folder / "course"
    course.mkdir()
    shutil.copy2(ROOT / "course.yaml", course / "course.yaml")
    for name in ("exercises", "reference"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    (course / "serve.yaml").write_text("rate:\n  per_address_per_minute: 10000000\n")
    return course


def invite_links(course: Path, db: str, port: int, logins: list[str], folder: Path) -> list[str]:
    """One login link per login, as ``grader serve invite ROSTER.csv`` prints them."""
    roster = folder / "roster.csv"
    roster.write_text("login\n" + "".join(f"{login}\n" for login in logins))
    students = len(logins)
    done = subprocess.run(
        [sys.executable, "-m", "grader", "serve", "invite", str(roster), "--course", str(course), "--db", db]
        + ["--port", str(port)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_serve: 'serve invite' failed ({done.returncode}): {done.stderr.strip()}")
    out = done.stdout
    links = [line.rsplit(",", 1)[1] for line in out.splitlines() if line.count(",") >= 2]
    if len(links) != students:
        raise SystemExit(f"bench_serve: 'serve invite' printed {len(links)} links for {students} students")
    return links


def start_server(course: Path, db: str, port: int, workers: int, log: Path) -> subprocess.Popen[bytes]:
    """``grader serve`` on 127.0.0.1:port, in a session of its own; returns once it answers."""
    command = [sys.executable, "-m", "grader", "serve", "--course", str(course), "--db", db]
    command += ["--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench_serve: the server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise SystemExit("bench_serve: the server did not answer within 120 s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server (it stops its workers) and wait for it, so its CPU time is counted."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def student(
    base: str, link: str, sample: str, arrival: float, start: float, poll: float | None, figures: Figures
) -> None:
    """Sign in by ``link`` at ``arrival`` s after ``start``, upload ``sample``, read the page until its feedback.

    A correct sample's feedback must be full marks, a buggy one's less (else it counts as an error).
    """
    # Each student's file is their own bytes (a comment naming the link), as in a real class: the server's
    # gradebook reuses the result of a file graded before, so identical uploads would measure that cache.
    data = (ROOT / "submissions" / sample / "attention.py").read_bytes() + f"\n# {link[-12:]}\n".encode()
    await asyncio.sleep(max(0.0, start + arrival - time.monotonic()))

    def expect(response: httpx.Response, status: int, what: str) -> bool:
        if response.status_code != status:
            figures.errors.append(f"{what}: HTTP {response.status_code}, {status} expected")
            return False
        return True

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        try:
            page = await client.get(link)
            if not expect(page, 200, "login page"):
                return
            done = await client.post(link, data={"csrf": CSRF.findall(page.text)[0]})
            if not expect(done, 303, "login"):
                return
            home = await client.get("/")
            if not expect(home, 200, "home"):
                return
            token = CSRF.findall(home.text)[0]
            began = time.monotonic()
            sent = await client.post("/submit", data={"csrf": token}, files={"file": ("attention.py", data)})
            if not expect(sent, 303, "upload"):
                return
            figures.submissions += 1
            where = sent.headers["location"]
            while True:
                page = await client.get(where)
                if not expect(page, 200, "feedback page"):
                    return
                refresh = REFRESH.search(page.text)
                if refresh is None:
                    break
                await asyncio.sleep(poll if poll is not None else float(refresh.group(1)))
            shown = FEEDBACK.search(page.text)
            if shown is None or shown.group(1) is None:
                figures.not_graded += 1
                figures.errors.append(f"{where}: no feedback on a page that stopped reloading ({sample})")
                return
            if (shown.group(1) == shown.group(2)) != sample.startswith("correct"):
                figures.wrong.append(f"{where}: {shown.group(0)} for the sample {sample}")
            figures.latencies.append(time.monotonic() - began)
            figures.arrived.append(began - start)
        except (httpx.HTTPError, IndexError) as exc:
            figures.errors.append(f"{type(exc).__name__}: {exc}")


def stored_times(db: str) -> list[tuple[str, float, float]]:
    """Each stored submission's state, seconds queued (receipt to a worker's claim) and seconds grading."""
    from sqlalchemy import create_engine, select
    from sqlalchemy.orm import Session

    from grader.serve.db import Submission, User

    engine = create_engine(db)
    with Session(engine) as session:
        rows = session.execute(
            select(Submission.state, Submission.received, Submission.started, Submission.graded)
            .join(User, User.id == Submission.user_id)
            .where(User.login.not_like(f"{WARMUP}%"))
        )
        times = [
            (state, (started - received).total_seconds(), (graded - started).total_seconds())
            if started is not None and graded is not None
            else (state, float("nan"), float("nan"))
            for state, received, started, graded in rows
        ]
    engine.dispose()
    return times


async def drive(base: str, links: list[str], seconds: float, poll: float | None, seed: int, figures: Figures) -> None:
    """The students arrive at seeded random times over ``seconds`` and submit, in turn, each of the samples."""
    rng = random.Random(seed)
    arrivals = sorted(rng.uniform(0, seconds) for _ in links) if seconds > 0 else [0.0] * len(links)
    start = time.monotonic()
    await asyncio.gather(
        *(
            student(base, link, SAMPLES[i % len(SAMPLES)], arrival, start, poll, figures)
            for i, (link, arrival) in enumerate(zip(links, arrivals, strict=True))
        )
    )


def run(options: argparse.Namespace) -> Figures:
    """Start the server on a course copy, drive the students, stop it; return the figures."""
    figures = Figures(students=options.students, load_before=os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp)
        course = make_course(folder)
        db = options.db or f"sqlite:///{folder / 'serve.db'}"
        port = free_port()
        warmups = [f"{WARMUP}{i}" for i in range(options.workers)]
        logins = warmups + [f"s{i:04d}" for i in range(options.students)]
        links = invite_links(course, db, port, logins, folder)
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        server = start_server(course, db, port, options.workers, folder / "server.log")
        base = f"http://127.0.0.1:{port}"
        began = time.monotonic()
        try:
            # One submission per worker first, outside the figures: a worker builds its grading run (the
            # checks, the reference's expected values, its sandbox's processes) when it starts.
            warm = Figures(students=len(warmups))
            asyncio.run(drive(base, links[: len(warmups)], 0, 0.1, options.seed, warm))
            figures.ready = time.monotonic() - started
            figures.errors += [f"warm-up: {line}" for line in warm.errors]
            began = time.monotonic()
            asyncio.run(drive(base, links[len(warmups) :], options.minutes * 60, options.poll, options.seed, figures))
        finally:
            figures.wall = time.monotonic() - began
            figures.load_after = os.getloadavg()
            stop_server(server)
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        figures.server_cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
        times = stored_times(db)
        done = sum(1 for state, _, _ in times if state == "done")
        if len(times) != figures.submissions or done != len(times):
            figures.errors.append(
                f"the database holds {len(times)} submissions, {done} graded; {figures.submissions} sent"
            )
            figures.not_graded = max(figures.not_graded, len(times) - done)
        figures.queued = [wait for _, wait, _ in times if not math.isnan(wait)]
        figures.grading = [took for _, _, took in times if not math.isnan(took)]
        if figures.errors:
            log = (folder / "server.log").read_text(errors="replace")
            print("server log (tail):\n" + log[-3000:], file=sys.stderr)
    return figures


def report(figures: Figures, command: str, target: float) -> bool:
    """Print the figures; True when the target is met."""
    graded = len(figures.latencies)
    p50, p95 = figures.percentile(0.50), figures.percentile(0.95)
    worst = max(figures.latencies, default=0.0)
    ok = (
        not figures.errors
        and not figures.wrong
        and figures.not_graded == 0
        and graded == figures.students
        and p95 <= target
    )
    print(f"students {figures.students}, submissions {figures.submissions}, graded with feedback seen {graded}")
    print(
        f"upload to visible feedback: p50 {p50:.2f} s, p95 {p95:.2f} s, max {worst:.2f} s (target p95 <= {target:g} s)"
    )
    print(
        "of which queued (p50/p95/max): {:.2f} / {:.2f} / {:.2f} s, grading: {:.2f} / {:.2f} / {:.2f} s".format(
            *(figures.percentile(q, part) for part in (figures.queued, figures.grading) for q in (0.5, 0.95, 1.0))
        )
    )
    print(f"request errors {len(figures.errors)}, not graded {figures.not_graded}, wrong feedback {len(figures.wrong)}")
    for line in (figures.errors + figures.wrong)[:10]:
        print(f"  {line}")
    print(f"server started and graded one warm-up submission per worker in {figures.ready:.1f} s (not counted)")
    print(f"throughput {graded / figures.wall:.2f} submissions/s over {figures.wall:.1f} s")
    print(
        f"CPU of the server and its workers {figures.server_cpu:.1f} s ({figures.server_cpu / max(graded, 1):.2f} s a "
        "submission; start-up included, sandboxed job processes counted only as far as they were waited for)"
    )
    print(
        "load average before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f} on {} cores".format(
            *figures.load_before, *figures.load_after, os.cpu_count()
        )
    )
    print(f"command: {command}")
    print("target met" if ok else "TARGET MISSED")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200, help="simulated students, one submission each")
    parser.add_argument("--minutes", type=float, default=2.0, help="the arrivals are spread over this many minutes")
    parser.add_argument("--quick", action="store_true", help="12 students over 15 s (a smoke test)")
    parser.add_argument(
        "--workers", type=int, default=2, help="the server's grading processes (grader serve's default: 2)"
    )
    parser.add_argument("--db", default=None, help="database URL (default: SQLite in the temporary folder)")
    parser.add_argument(
        "--poll", type=float, default=None, help="seconds between page reads (default: the page's refresh)"
    )
    parser.add_argument("--seed", type=int, default=14, help="the arrivals' random seed")
    parser.add_argument("--target", type=float, default=5.0, help="p95 seconds to meet")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON")
    options = parser.parse_args(argv)
    if options.quick:
        options.students, options.minutes = 12, 0.25
    command = shlex.join(["python", "benchmarks/bench_serve.py", *(sys.argv[1:] if argv is None else argv)])
    command = re.sub(r"://([^:/@\s]+):[^@\s]+@", r"://\1:***@", command)  # a database password is not printed
    figures = run(options)
    ok = report(figures, command, options.target)
    if options.json:
        data: dict[str, Any] = dataclasses.asdict(figures)
        data.update(p50=figures.percentile(0.5), p95=figures.percentile(0.95), ok=ok)
        Path(options.json).write_text(json.dumps(data, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
