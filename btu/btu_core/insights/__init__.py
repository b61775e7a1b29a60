"""What the runs add up to: `metrics` (each run's outcome counted for Prometheus and Frappe's monitor; the scrape
endpoint), `run_stats` (the Task Log queries of the BTU Dashboard's charts and the duration report), `dashboard_cards`
(its number cards)."""
