"""The reports' pictures: one module of PNG plots per suite (registered in `registry.PLOTTERS`, which
`python -m reports plot` and the HTML page draw), the roofline, the lever bars and the same cases on each system
(`effects`, `system_bars`), the history's levels, and the shared style.

matplotlib only (Agg); no torch.
"""
