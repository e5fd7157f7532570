"""Op suites: matmul, convolution and attention cases, their FLOP and byte models and float64 references.

Belongs here: a suite of single operations timed in device time. May import `suites.core`; never
`training`, `checks` or the harness.
"""
