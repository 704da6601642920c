"""One module per subcommand; each registers itself, its options and its handler (grader_add_commands)."""
