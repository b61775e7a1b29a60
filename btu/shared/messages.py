"""The shared contract's error messages: a template and its arguments, translated where they are shown.

An error the Frappe side shows to a user (a schedule's, say) is raised with its problem as a template wrapped in `_`,
and the values as keyword arguments: `ScheduleError("minute", text, _("{name} {value} is outside {low}-{high}"),
name="minute", value=61, low=0, high=59)`. `_` only marks the template, as gettext_noop does, for Frappe's
translation extraction (`bench generate-pot-file` collects the app's `_("...")` calls); the Frappe side translates the
template and then fills in the values (`btu.btu_core.messages`); the scheduler logs it in English.
"""

from __future__ import annotations


def _(template: str) -> str:
	"""`template`, marked for translation."""
	return template
