"""What the report commands and the HTML page share: each section of a report as a frame, before a command renders
it as text or the page renders it as HTML.

A command module (reports/__main__.py `COMMANDS`) holds its command line and its own rendering; what another
command or the page needs of it lives here, so that no command imports another (tests/test_layout.py): the results
table of a group (`group_tables`) and the devices side by side (`systems`). Their pictures are in reports/plots.
"""
