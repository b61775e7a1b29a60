"""Schedules on the Frappe side: a BTU Task Schedule as schedule semantics (`spec`, with its `calendars`' dates and its
`skipped_slots`), its next fires for people (`preview`), the schedules apps declare in hooks.py (`declared_schedules`,
each entry checked and mapped by `hook_entries`, Frappe-free for tier 1), and Frappe's Scheduled Job Types while BTU
fires them (`scheduled_job_types`)."""
