"""Kestrel's benchmark harness (see bench/README.md): measures the real binary against
the scripted model server and appends the results to bench/RESULTS.md."""
