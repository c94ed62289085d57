"""What every part of the project shares, each in one home.

- :mod:`ema_boundary.io`: atomic outputs (folders and files written under a temporary name, then
  renamed), JSON and JSON-lines writing;
- :mod:`ema_boundary.usage`: the one-line usage error, its exit code and the argument parser that
  prints it (the bottom layer: every command's conventions);
- :mod:`ema_boundary.cli`: the ``ema-boundary`` command, the one module of this package above the rest (it
  imports the report and the runner; nothing imports it);
- :mod:`ema_boundary.figures`: matplotlib set up for files only (no display);
- :mod:`ema_boundary.paper`: the paper's reported numbers, read by the report, the grammar probe
  and the README table's test.
"""
