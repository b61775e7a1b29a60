"""Alerts and pause on failure, and the mail a run sends its recipients.

A rule (a BTU Alert Rule row) on a Task watches all its runs; one on a Schedule, that schedule's. It says which
event to tell whom: by email, by a Desk notification, by a webhook. Layered so that nothing imports back up:

- `rules`: the rules and their thresholds; `recipients`: whom a rule or an Email Recipient may name, by whose choice;
- `webhook_post` (where a webhook may POST, how it is signed, how long it may take) and `overdue_slots` (which slots
  should have a Task Log by now: the missed-fire check's arithmetic), Frappe-free so tier 1 tests them;
- `webhooks`: a webhook's URL checked and its one signed POST, on a site; `delivery`: a message on a rule's channels
  (mail, bell, the webhook's job), test alerts;
- `incidents`: one BTU Alert Incident per (rule, scope), opened and resolved with one message each;
- `run_events` (late start, failure, failures in a row, from the task runner), `pause` (pause on failure),
  `watchdog` (missed fires, stuck runs, no scheduler alive, every minute from Frappe's scheduler);
- `validation`: a Task's or Schedule's rules checked on save; `notifications`: a run's mail to its Email Recipients.

Nothing is imported here: a run imports `run_events`, and importing a package runs its `__init__` first.
"""


def __getattr__(name: str):
	"""The two paths stored while alerts was one module: `post_webhook`, named by webhook jobs queued before an upgrade
	and run after it, and `check`, the watchdog's Scheduled Job Type row until bench migrate resyncs it from hooks.py.
	Imported on their first use only: this file runs before every module of the package."""
	if name == "post_webhook":
		from btu.btu_core.alerts.delivery import post_webhook

		return post_webhook
	if name == "check":
		from btu.btu_core.alerts.watchdog import check

		return check
	raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
