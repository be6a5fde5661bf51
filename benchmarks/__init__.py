"""gpuc's maintained benchmarks (benchmarks/README.md).  Run each from the repository root as a module,
`python -m benchmarks.NAME ...`, so that `benchmarks.timing` and `tests.helpers` import without path edits."""
