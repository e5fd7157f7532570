"""The library: what is measured (cases, FLOP and byte models, reference checks) and how (timing, telemetry)."""
