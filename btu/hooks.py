app_name = "btu"
app_title = "Background Tasks Unleashed"
app_publisher = "BTU contributors"
app_description = "A precise, highly available task scheduler for Frappe, with per-run logs"
app_email = "btu@example.com"
app_license = "MIT"
# No required_apps: Frappe is always there, and install-app resolves a bare
# "frappe" entry through the GitHub API (it fails offline).

before_install = "btu.btu_core.setup.install.before_install"
after_install = "btu.btu_core.setup.install.after_install"
before_uninstall = "btu.btu_core.setup.install.before_uninstall"
after_uninstall = "btu.btu_core.setup.install.after_uninstall"
before_migrate = ["btu.btu_core.sealed.store.ensure_table"]
after_migrate = [
	"btu.btu_core.sealed.store.seal_stray_values",
	"btu.btu_core.setup.install.ensure_roles",
	"btu.btu_core.schedules.declared_schedules.sync",
	"btu.btu_core.setup.install.ensure_desk_entry",
	"btu.btu_core.setup.install.compile_bytecode",
]
# Another app's btu_schedules: synced when it is installed, its rows removed when it is uninstalled.
after_app_install = "btu.btu_core.schedules.declared_schedules.app_installed"
after_app_uninstall = "btu.btu_core.schedules.declared_schedules.app_uninstalled"

# run-tests: a site whose setup wizard never ran shows it on every Desk page, which the browser tests open.
before_tests = "btu.btu_core.tests.site.before_tests"

# bench keeps the types block of each DocType controller current when it exports a DocType (developer_mode).
export_python_type_annotations = True

# Incidents are history: they never keep a Task or Schedule from being deleted.
ignore_links_on_delete = ["BTU Alert Incident"]

# Missed fires, stuck runs, no scheduler alive (btu.btu_core.alerts.watchdog). It stays on Frappe's scheduler, not on
# btu_schedules: it is the watchdog that notices no BTU scheduler process is alive, so it must not need one to run.
scheduler_events = {"cron": {"* * * * *": ["btu.btu_core.alerts.watchdog.check"]}}

# BTU's own maintenance, fired by BTU's scheduler as declared schedules (README: Declaring schedules in your
# app's hooks.py); bench migrate syncs them into BTU Tasks and Schedules (btu.btu_core.schedules.declared_schedules).
btu_schedules = [
	{
		"name": "delete_expired_logs",
		"function": "btu.btu_core.doctype.btu_task_log.btu_task_log.delete_expired_logs",
		"description": "BTU: delete Task Logs older than the retention days",
		"frequency": "Daily",
		"hour": 3,
		"minute": 17,
		"queue": "long",
		"timeout": 3600,
		"overlap_policy": "skip",
	},
	{
		"name": "delete_expired_run_requests",
		"function": "btu.btu_core.doctype.btu_run_request.btu_run_request.delete_expired_run_requests",
		"description": "BTU: delete finished Run Requests older than the retention days",
		"frequency": "Daily",
		"hour": 3,
		"minute": 23,
		"queue": "long",
		"timeout": 3600,
		"overlap_policy": "skip",
	},
	{
		"name": "mark_lost_runs_timed_out",
		"function": "btu.btu_core.runs.lost_runs.mark_lost_runs_timed_out",
		"description": "BTU: mark runs whose worker died Timed Out",
		"cron": "*/5 * * * *",
		"queue": "short",
		"timeout": 300,
		"overlap_policy": "skip",
	},
]

# ERPNext/HRMS's Holiday List (when installed): a BTU Calendar that includes one is saved again, so its schedules
# recompile.
doc_events = {
	"Holiday List": {"on_update": "btu.btu_core.doctype.btu_calendar.btu_calendar.holiday_list_changed"},
	"Version": {"before_insert": "btu.btu_core.sealed.copies.hide_in_version"},
	"Scheduled Job Type": {
		"on_update": "btu.btu_core.schedules.scheduled_job_types.job_type_changed",
		"on_trash": "btu.btu_core.schedules.scheduled_job_types.job_type_changed",
	},
}
# Frappe's scheduler tick leaves to BTU the Scheduled Job Types BTU fires (BTU Configuration, "Fire Frappe's
# Scheduled Jobs"); otherwise Frappe's controller as it is. See btu/btu_core/schedules/scheduled_job_types.py.
override_doctype_class = {"Scheduled Job Type": "btu.btu_core.schedules.scheduled_job_types.ScheduledJobType"}

# Prometheus scrapes /api/method/btu.btu_core.metrics.scrape (README, docs/grafana): that public path, in users' scrape
# configs, still serves the endpoint, which lives in btu/btu_core/insights/metrics.py.
override_whitelisted_methods = {"btu.btu_core.metrics.scrape": "btu.btu_core.insights.metrics.scrape"}

# An enqueued run's Log is a System Manager's, as Frappe's own background jobs are (btu/btu_core/setup/log_access.py).
has_permission = {"BTU Task Log": "btu.btu_core.setup.log_access.log_has_permission"}
permission_query_conditions = {"BTU Task Log": "btu.btu_core.setup.log_access.log_query_conditions"}

# Functions BTU Tasks may run (btu/shared/declared.py): dotted paths or globs; apps also use @btu.runnable.
# The demo's sample tasks are declared by the dev bench's own app (devbench/apps/btu_demo), not here.
btu_tasks = [
	# BTU's maintenance (btu_schedules above)
	"btu.btu_core.doctype.btu_task_log.btu_task_log.delete_expired_logs",
	"btu.btu_core.doctype.btu_run_request.btu_run_request.delete_expired_run_requests",
	"btu.btu_core.runs.lost_runs.mark_lost_runs_timed_out",
]
