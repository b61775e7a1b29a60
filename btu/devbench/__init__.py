"""Dev benches: a Frappe bench's layout and BTU's tables without Frappe, for the demo, tier-1 tests and benchmarks.

Not part of the scheduler: `btu-scheduler dev-bench` and `demo` use it, the product never does.
`bench` lays out the directories and databases, `schema` makes BTU's tables as Frappe v15 does from
the DocType JSON, `data` writes rows as Frappe writes them, `demo_tasks` are functions the demo runs.
"""
