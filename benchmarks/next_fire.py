"""Next-fire computations per second, one core, for typical schedules.

Each case asks one spec (parsed expression and zone transitions cached, as
the scheduler keeps them) for next_slot() after 1,000 instants spread over
2025-2026, round and round, and reports calls per second. Writes benchmarks/results/next_fire.json.

Run: scripts/benchmark next_fire [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import croniter

from btu.shared.schedule import ScheduleSpec

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
ORIGIN = int(START.timestamp())
CASES = [
	("*/5 * * * *", "UTC", dict(kind="cron", cron="*/5 * * * *")),
	("0 9 * * 1-5", "America/New_York", dict(kind="cron", cron="0 9 * * 1-5")),
	("30 2 * * *", "America/New_York", dict(kind="cron", cron="30 2 * * *")),
	("*/15 * * * *", "Australia/Lord_Howe", dict(kind="cron", cron="*/15 * * * *")),
	("*/10 * * * * *", "Europe/London", dict(kind="cron", cron="*/10 * * * * *")),
	("0 0 1 * *", "Asia/Kolkata", dict(kind="cron", cron="0 0 1 * *")),
	("interval 90 s", "UTC", dict(kind="interval", every=90, origin=ORIGIN)),
	("*/5 * * * * +jitter 30", "America/New_York", dict(kind="cron", cron="*/5 * * * *", jitter_secs=30)),
]


AFTERS = [datetime.fromtimestamp(ORIGIN + i * 63_113, timezone.utc) for i in range(1000)]


def measure(spec: ScheduleSpec, seconds: float, with_fire_time: bool) -> tuple[int, float]:
	calls = 0
	began = time.perf_counter()
	deadline = began + seconds
	while True:
		for after in AFTERS:
			slot = spec.next_slot(after)
			if with_fire_time:
				spec.fire_time(slot)
		calls += len(AFTERS)
		now = time.perf_counter()
		if now >= deadline:
			return calls, now - began


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	parser.add_argument("--seconds", type=float, default=1.0, help="time per case")
	args = parser.parse_args()
	rows = []
	for label, zone, kwargs in CASES:
		spec = ScheduleSpec(name="TS-bench", zone_name=zone, **kwargs)
		with_fire_time = bool(kwargs.get("jitter_secs"))
		measure(spec, 0.05, False)  # warm the zone's transition cache
		calls, elapsed = measure(spec, args.seconds, with_fire_time)
		rows.append({"case": label, "zone": zone, "per_second": round(calls / elapsed), "calls": calls})
	width = max(len(r["case"]) for r in rows)
	print(f"{'case':<{width}}  {'zone':<20}  next fires/s (1 core)")
	for r in rows:
		print(f"{r['case']:<{width}}  {r['zone']:<20}  {r['per_second']:>12,}")
	out = Path(__file__).parent / "results" / "next_fire.json"
	out.parent.mkdir(exist_ok=True)
	out.write_text(
		json.dumps(
			{
				"python": platform.python_version(),
				"croniter": getattr(croniter, "__version__", "?"),
				"seconds_per_case": args.seconds,
				"results": rows,
			},
			indent=1,
		)
		+ "\n"
	)
	print(f"wrote {out}")


if __name__ == "__main__":
	main()
