"""Where grader meets other tools: the pytest plugin, the student-side check API, CI files."""
