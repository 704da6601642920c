"""Grading a class: collect the checks, the batch loop, result keys, judging rules, audit and diff."""
