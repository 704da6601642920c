"""The built-in plugins: each module of this package is one, loaded in the order of
`grader.config.plugins.BUILTIN_PLUGINS` (the model is pytest's ``default_plugins``)."""
