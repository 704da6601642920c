"""``grader serve``: the web application, its LTI 1.3 tool side and its grading workers."""
