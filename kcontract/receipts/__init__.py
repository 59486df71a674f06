"""Receipts: a row per entry and control of a contract, each judged current or not on its own.

`receipt` is the one door to a receipt file (read, fields, puts, merge, write under its lock) and `schema` its
format in one place; `depends` says what a row depends on, `rows` makes and merges rows and recomputes the
SUMMARY, `write` writes a run into its receipt, `judge` and `check` judge rows, `machine` keeps rows whose machine
code is unchanged current, `merge` checks shards before they join, `upgrade` turns the earlier whole-contract form
into rows, and `carried` keeps mutation scores, coverage and bench rows while their kernel source is unchanged.
"""
