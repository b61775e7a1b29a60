"""`btu-scheduler next`: list a cron expression's next fires; needs no service."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_OK
from btu.shared.instants import parse_iso
from btu.shared.messages import _
from btu.shared.schedule import ScheduleError, ScheduleSpec, parse_zone
from btu.shared.schedule.zones import clock_for, wall_seconds

NAME = "next"
HELP = "print the next fire instants of a cron expression"
DESCRIPTION = (
	"Print the next N fires of a cron expression, one ISO 8601 instant per line in the schedule's zone "
	"with its UTC offset, following BTU's DST rules. Exit 2 on a bad expression, zone or time."
)
FRAPPE_BENCH = False


def arguments(parser) -> None:
	parser.add_argument(
		"--cron", required=True, help="5 fields (m h dom mon dow), 6 with leading seconds, or @daily etc."
	)
	parser.add_argument("--tz", default="UTC", help="IANA zone, UTC or an offset like +05:30 (default UTC)")
	parser.add_argument("--after", help="ISO 8601 start (exclusive); without an offset it is in --tz (default now)")
	parser.add_argument("-n", type=int, default=10, help="how many fires (default 10)")


def run(args) -> int:
	try:
		zone = parse_zone(args.tz)
		spec = ScheduleSpec(name="cli", zone_name=args.tz, kind="cron", cron=args.cron)
		after = parse_after(args.after, zone)
		if args.n < 1:
			raise ScheduleError("-n", args.n, _("must be 1 or more"))
	except ValueError as exc:  # a ScheduleError, or --after that is not ISO 8601
		print(f"btu-scheduler next: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	for fire in spec.preview(args.n, after):
		print(fire.astimezone(zone).isoformat())
	return EXIT_OK


def parse_after(text: str | None, zone) -> datetime:
	"""The instant --after names (a naive time is a wall time in `zone`), or now without one."""
	if not text:
		return datetime.now(timezone.utc)
	value = parse_iso(text, "--after")
	if value.tzinfo is None:
		instant = clock_for(zone).instant(wall_seconds(value))
		return datetime.fromtimestamp(instant, timezone.utc)
	return value
