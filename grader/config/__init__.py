"""The run's configuration: Config and the typed hook facade, the plugin manager, entry points, the course secret and the strict YAML reader."""
