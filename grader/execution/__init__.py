"""The parent side of a job: the frame protocol, the strict boundary decoder, the servers, run_calls."""
