"""Dev benches: a Frappe bench's layout and BTU's tables without Frappe, for the demo, tier-1 tests and benchmarks.

Developer tooling, not part of BTU: it lives beside the `btu` package in the repository, setup.py does not
install it, and nothing in `btu` imports it (tests/setup/test_layout.py). Run from the repository root (or
with it on sys.path): `python -m devbench bench DIR` makes a dev bench, `python -m devbench demo` runs
README command one's demo (`cli`). `bench` lays out the directories and databases, `schema` makes BTU's
tables as Frappe v15 does from the DocType JSON, `data` writes rows as Frappe writes them, and
`apps/btu_demo` is the dev bench's own app, whose hooks.py declares the demo's task functions.
"""
