"""Command-line layer: argument parsing, output formats and exit codes. Thin over the library."""
