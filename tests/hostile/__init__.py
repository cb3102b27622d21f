"""Hostile-input corpus, command runner and mutation fuzzer for the file-reading commands."""
