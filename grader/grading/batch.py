"""`Batch`: a class's submissions graded by a few threads, each handing over the results it graded.

No future, queue or wake-up of another thread per submission: the thread that graded a submission
hands its result over itself, one thread at a time, and the caller's thread only waits for the
batch to end (or for Ctrl-C).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["STOP_WAIT_SECONDS", "Batch"]

STOP_WAIT_SECONDS = 5.0
"""How long a stopping batch waits for a hand-over under way (the writers of one submission) to end."""


class Batch(Generic[T]):
    """Submissions graded by `run`'s threads, each result handed over by the thread that graded it.

    Parameters
    ----------
    todo : iterable of int
        The submissions to grade (their indices), taken in this order.
    grade : callable
        Grades one submission (by index) and returns its result. Run by every grading thread at
        once; an exception it raises stops the batch and is raised by `run`.
    hand_over : callable
        Hands one submission's result over (index, result): run by one thread at a time, never
        after the batch stopped; an exception it raises stops the batch and is raised by `run`.
    on_stop : callable
        Called first when the batch stops (Ctrl-C, or a fault).
    """

    def __init__(
        self,
        todo: Iterable[int],
        grade: Callable[[int], T],
        hand_over: Callable[[int, T], None],
        on_stop: Callable[[], None],
    ) -> None:
        self.grade, self._hand_over, self.on_stop = grade, hand_over, on_stop
        self.waiting = iter(todo)
        self.taking = threading.Lock()
        self.handing = threading.Lock()  # one hand-over at a time: the writers and the gradebook are not shared
        self.stopped = False
        self.ended: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()  # each thread's end, or its fault

    def run(self, threads: int) -> None:
        """Grade every submission in ``threads`` threads (named ``grader_N``); raise the first fault of any.

        On Ctrl-C (or a fault), no submission is taken or handed over any more, and nothing waits
        here for the submissions in flight (their jobs are ended by the caller's clean-up).
        """
        started = [threading.Thread(target=self.work, name=f"grader_{number}") for number in range(threads)]
        try:
            for thread in started:
                thread.start()
            for _ in started:
                fault = self.ended.get()
                if fault is not None:
                    raise fault
        except BaseException:
            self.on_stop()
            self.stop()
            raise

    def stop(self) -> None:
        """Take and hand over no more (waiting for a hand-over under way, within `STOP_WAIT_SECONDS`)."""
        handing = self.handing.acquire(timeout=STOP_WAIT_SECONDS)
        self.stopped = True
        if handing:
            self.handing.release()

    def work(self) -> None:
        """A grading thread: grade and hand over the next submission until none is left, or the batch stops."""
        fault: BaseException | None = None
        try:
            while True:
                with self.taking:
                    index = None if self.stopped else next(self.waiting, None)
                if index is None:
                    break
                self.hand_over(index, self.grade(index))
        except BaseException as exc:  # noqa: BLE001 - raised in the waiting thread (`run`)
            self.stopped = True
            fault = exc
        self.ended.put(fault)

    def hand_over(self, index: int, result: T) -> None:
        """Hand one submission's result over (none once the batch stopped)."""
        with self.handing:
            if self.stopped:
                return
            try:
                self._hand_over(index, result)
            except BaseException:
                self.stopped = True  # within the hand-over: no other thread hands a result over after this fault
                raise
