"""`python -m reports plot`: one module of PNG plots per suite, registered in `command.PLOTTERS`.

matplotlib only (Agg); no torch.
"""
