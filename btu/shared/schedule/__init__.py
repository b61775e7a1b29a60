"""Schedule semantics: cron with time zones, intervals, one-offs, catch-up.

Pure: no I/O, no frappe. The Desk uses it to validate, describe and preview
a BTU Task Schedule; the scheduler uses it to decide what to fire.

Slots and zones
	Every schedule has nominal slots, whole-second instants. Cron
	expressions are evaluated on the wall clock of the schedule's zone
	(IANA name, UTC, or a fixed offset such as +05:30). DST follows Debian
	cron(8): an expression whose minute or hour field starts with `*` runs
	in real time (wall times skipped by spring-forward do not occur, wall
	times repeated by fall-back fire in both passes); any other expression
	is fixed-time: a skipped wall time fires once at the transition instant
	(several skipped times give one fire), a repeated one fires once, at
	its first occurrence. Intervals are origin + k * every in real time,
	origin being start_time, else creation + every. A Once schedule has one
	slot, run_at (in a gap: the transition instant; repeated: the first).
	start_time and end_time bound the slots (inclusive). These three columns
	are on the site's system zone's wall clock, as every Frappe Datetime
	is; the schedule's time_zone is the zone of its recurrence only.

Jitter
	fire_time(slot) = slot + a whole number of seconds in [0, jitter_secs],
	from a hash of (name, slot), always less than the gap to the next slot;
	every process computes the same value, and fire times keep slot order.

plan(cursor, now, runs, grace, ahead)
	`cursor` is the pending slot (the first not yet handled). Due slots are
	the slots s >= cursor with fire_time(s) <= now + ahead (the scheduler
	prepares fires `ahead` of their moment and queues each at its fire
	time; ahead never changes which slots are missed). A due slot is on time
	when now - fire_time(s) <= grace; on-time slots always fire. Older due
	slots are missed: a missed slot with now - s > catch_up_window is
	expired (dropped, counted in `expired`, whatever the policy); the rest
	follow catch_up_policy:
		skip: dropped, counted in `skipped`;
		fire_once: the latest fires, the others are counted in `skipped`;
		fire_all: the latest catch_up_max (at most 10,000) fire, older ones
		in `skipped`.
	`fire` lists the slots to fire now, oldest first, at most 1,000 of them:
	the rest of a longer catch-up stays due, and the next plan from
	`next_cursor` fires it, so one step never builds more jobs than that.
	With a run_limit, runs + len(fire) never exceeds it (the oldest are
	kept) and reaching it finishes the schedule. `next_cursor` is the first
	slot not yet fired, None when `finished` (end passed, Once done, or
	run_limit reached).
	A long backlog is not walked slot by slot: the expired region is jumped
	over. Interval counts are arithmetic and exact; cron counts enumerate at
	most 10,000 slots per call, after which `count_truncated` is True and
	`skipped`/`expired` are lower bounds.

Modules
	spec: ScheduleSpec, what a schedule is (fields, slots, jitter, describe);
	row: a BTU Task Schedule row's columns as a spec; catch_up: plan();
	rules: the slots of cron, interval and once, behind one interface;
	cron, zones, frequency: expressions, zone clocks, the form's helpers.
"""

from __future__ import annotations

from btu.shared.schedule.catch_up import FirePlan
from btu.shared.schedule.errors import ScheduleError
from btu.shared.schedule.frequency import frequency_to_cron
from btu.shared.schedule.spec import ScheduleSpec
from btu.shared.schedule.zones import parse_zone

__all__ = ["FirePlan", "ScheduleError", "ScheduleSpec", "frequency_to_cron", "parse_zone"]
