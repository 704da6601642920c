"""``python -m grader``: the same as the ``grader`` command."""

from grader.cli.launch import console_main

if __name__ == "__main__":
    console_main()
