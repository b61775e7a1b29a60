"""What the runs add up to: `metrics` (each run's outcome counted for Prometheus and Frappe's monitor; the scrape
endpoint) over `task_outcomes` (the per-site Redis hash of those counts and its Prometheus collector, Frappe-free for
tier 1), `run_stats` (the Task Log queries of the BTU Dashboard's charts and the duration report), `dashboard_cards`
(its number cards)."""
