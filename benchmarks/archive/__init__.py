"""One-off experiments (A/B runs, tuning sweeps, probes) kept as the record behind figures the README and
code comments cite; not maintained (benchmarks/archive/README.md)."""
