"""What a reconcile reads of a site before its rows (`SiteRead`): its settings and the checksum of its rows, read in
one query by `site_reader`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase


@dataclass(frozen=True)
class SiteRead:
	"""What a reconcile reads of a site before its rows (one round trip: `site_settings.read`)."""

	db: SiteDatabase
	system_tz: str | None
	held: str | None  # why the site's schedules do not fire; None when they do
	# Whether BTU fires the site's Scheduled Job Types (see `read_site`), and Frappe's "All" interval for them.
	scheduled_jobs: bool
	scheduler_interval: object
	# What a compiled schedule depends on besides its row: when it changes, every row is compiled again.
	context: str
	summary: tuple | None  # (row count, checksum) of what fires, when read for a full reconcile
