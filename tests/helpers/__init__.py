"""What the test modules share: model builders, LiteRT references, the op catalogues, runners and
checks.  No test module imports another; they all import from here (tests/ is on sys.path through
pyproject.toml's pytest `pythonpath`)."""
