def grader_configure(config:
