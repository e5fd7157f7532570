"""`python -m reports trace`: Kineto traces read as a stream, events typed, kernels classified, time summarized.

The command lives in `command`; `jsonstream` reads the file, `events` types what it holds, `kernels` names the
class of a kernel and `summary` adds it up. No torch, no pandas.
"""
