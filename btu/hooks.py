app_name = "btu"
app_title = "Background Tasks Unleashed"
app_publisher = "BTU contributors"
app_description = "A precise, highly available task scheduler for Frappe, with per-run logs"
app_email = "btu@example.com"
app_license = "MIT"
# No required_apps: Frappe is always there, and install-app resolves a bare
# "frappe" entry through the GitHub API (it fails offline).

before_install = "btu.btu_core.install.before_install"
after_install = "btu.btu_core.install.after_install"
before_uninstall = "btu.btu_core.install.before_uninstall"
after_uninstall = "btu.btu_core.install.after_uninstall"
after_migrate = ["btu.btu_core.install.ensure_roles"]

# bench keeps the types block of each DocType controller current when it exports a DocType (developer_mode).
export_python_type_annotations = True

# Incidents are history: they never keep a Task or Schedule from being deleted.
ignore_links_on_delete = ["BTU Alert Incident"]

scheduler_events = {
	"daily": ["btu.btu_core.doctype.btu_task_log.btu_task_log.delete_expired_logs"],
	"cron": {
		"*/5 * * * *": ["btu.btu_core.task_runner.mark_lost_runs_timed_out"],
		# Missed fires, stuck runs, no scheduler alive (btu.btu_core.alerts); issue 18 moves these onto BTU schedules.
		"* * * * *": ["btu.btu_core.alerts.check"],
	},
}

# ERPNext/HRMS's Holiday List (when installed): a BTU Calendar that includes one is saved again, so its schedules recompile.
doc_events = {"Holiday List": {"on_update": "btu.btu_core.doctype.btu_calendar.btu_calendar.holiday_list_changed"}}

# Functions BTU Tasks may run (btu/shared/declared.py): dotted paths or globs; apps also use @btu.runnable.
btu_tasks = ["btu.devbench.demo_tasks.*"]
