"""The scheduler's runtime state in Redis, and the atomic operations on it.

Per schedule a hash (`Keys.schedule_key`): its compiled spec (JSON, with its
fingerprint) and job template (JSON), `cursor` (the pending slot, epoch
ms: the value every fire compares and moves), `fire_at`, `runs`, the last
fire, `paused` and `finished`. One sorted set (`Keys.due`) orders
every schedule of every site by fire time; another (`Keys.prepared`)
holds the fires prepared ahead of their moment, indexed per schedule
(`Keys.prepared_index_key`) so that withdrawing one schedule's fires
touches no other's. A fire claims its slot when it is prepared (prepare.lua)
and is queued at its moment (release.lua). All writes that race with a fire
go through Lua scripts, but for taking a paused site's schedules off the due
set (`hold_site`): the reconciler does that itself, and puts them back when the
site resumes.

No value found in Redis is trusted: a key of the wrong type, a member that is
not one BTU writes, or text where a number belongs is quarantined (moved
aside with the reason, `quarantine`) and the schedule rebuilt from its row
(`resync`), so one wrong value costs one schedule at most, never the process.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from functools import cached_property

import redis

from btu.scheduler_daemon.store import scripts
from btu.scheduler_daemon.store.fires import DueEntry, FireItem
from btu.scheduler_daemon.store.jobs import JOB_KEY_PREFIX, QUEUES_KEY
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome
from btu.shared.keys import RESYNC_ALL, Keys, due_member, parse_due_member

RECENT_FIRES = 200
# A schedule's state hash; "spec" and "job" only in a state written before they had their definition key.
STATE_FIELDS = ("cursor", "fire_at", "runs", "fingerprint", "paused", "finished", "spec", "job")


# JSON as the state stores it: every schedule's definition holds two documents, so each space is paid per schedule.
COMPACT = (",", ":")


@dataclass
class CompiledSchedule:
	"""One schedule as the reconcile compiled it, for the upsert script."""

	name: str
	fingerprint: str
	spec: dict
	job: dict
	paused: bool
	active: bool
	cursor_if_new: str  # for a schedule new to the state (resumes after its last logged slot)
	fire_at_if_new: str
	cursor_if_changed: str  # for a changed or resumed schedule (next slot after now)
	fire_at_if_changed: str
	modified: str

	def args(self, site: str) -> list:
		return [
			due_member(site, self.name),
			self.name,
			self.fingerprint,
			json.dumps(self.spec, sort_keys=True, separators=COMPACT),
			json.dumps(self.job, sort_keys=True, separators=COMPACT),
			"1" if self.paused else "0",
			"1" if self.active else "0",
			self.cursor_if_new,
			self.fire_at_if_new,
			self.cursor_if_changed,
			self.fire_at_if_changed,
			self.modified,
		]


@dataclass(frozen=True)
class Prepared:
	"""A member of the prepared set (`Keys.prepared`), as prepare.lua writes it."""

	job_id: str
	queue_key: str
	state_key: str
	counters_key: str
	due_member: str
	slot_ms: int
	fire_at_ms: int
	overlap_skip: bool
	prepared_ms: int
	task: str = ""  # with a concurrency limit only (members of a Task without one have nine fields)
	max_concurrent: int = 0

	@classmethod
	def parse(cls, member: str | bytes) -> Prepared:
		"""The member's fields; ValueError for one that prepare.lua cannot have written."""
		if isinstance(member, bytes):
			member = member.decode("utf-8", "replace")
		f = member.split("\t")
		if len(f) not in (9, 11) or "|" not in f[4]:
			raise ValueError(
				f"prepared member {member[:200]!r} is not nine or eleven tab-separated fields with a <site>|<schedule>"
			)
		limit = (f[9], int(f[10])) if len(f) == 11 else ()
		return cls(*f[:5], int(f[5]), int(f[6]), f[7] == "1", int(f[8]), *limit)

	@cached_property
	def target(self) -> tuple[str, str]:
		"""(site, schedule)"""
		return parse_due_member(self.due_member)

	@property
	def site(self) -> str:
		return self.target[0]

	@property
	def schedule(self) -> str:
		return self.target[1]


@dataclass(frozen=True)
class Released:
	"""One prepared fire whose moment came, and what the release script did with it."""

	member: bytes | str  # parsed when first read, so a release loop only collects
	outcome: str  # a FireOutcome
	lag_ms: int
	reason: str = ""  # why it was quarantined or its push refused

	@classmethod
	def of(cls, member: bytes | str, outcome: bytes | str, lag_ms: int) -> Released:
		"""A fire as the release script names it: its outcome text is "<outcome>" or "<outcome>: <reason>"."""
		outcome, _, reason = text(outcome).partition(": ")
		return cls(member, outcome, lag_ms, reason)

	@cached_property
	def entry(self) -> Prepared:
		return Prepared.parse(self.member)

	def record(self) -> dict:
		entry = self.entry
		return fire_record(
			entry.schedule, entry.slot_ms, entry.fire_at_ms + self.lag_ms, self.lag_ms, entry.job_id, self.outcome
		)


def fire_record(schedule: str, slot_ms: int, enqueued_ms: int, lag_ms: int, job_id: str, outcome: str) -> dict:
	"""One entry of a site's recent fires (`Keys.recent_fires_key`)."""
	return {
		"schedule": schedule,
		"slot_ms": slot_ms,
		"enqueued_ms": enqueued_ms,
		"lag_ms": lag_ms,
		"job_id": job_id,
		"outcome": outcome,
	}


def prepare_args(keys: Keys, lease_value: str, stamp: str, grace_ms: int, items: list[FireItem]) -> list:
	"""The prepare script's ARGV: each job shape once, then the items with only what differs per job."""
	shapes: dict[int, int] = {}
	shape_args: list = []
	item_args: list = []
	for item in items:
		item_args += [
			due_member(item.site, item.schedule),
			keys.schedule_key(item.site, item.schedule),
			keys.counters_key(item.site),
			item.expected_cursor,
			item.next_cursor,
			item.next_fire_at,
			"1" if item.overlap_skip else "0",
			item.skipped,
			item.expired,
			item.task,
			item.max_concurrent,
			len(item.jobs),
		]
		for job in item.jobs:
			number = shapes.get(id(job.shape))
			if number is None:
				number = shapes[id(job.shape)] = len(shapes) + 1
				shape_args += [job.shape.queue_key, len(job.shape.fields)]
				for field, value in job.shape.fields.items():
					shape_args += [field, value]
			item_args += [job.slot_ms, job.fire_at_ms, job.job_id, number, job.description, job.data]
	return [lease_value, JOB_KEY_PREFIX, stamp, grace_ms, len(shapes), *shape_args, len(items), *item_args]


@dataclass(frozen=True)
class Acks:
	"""How many replicas acknowledged a fire script's writes (WAIT) of those waited for."""

	acked: int
	wanted: int

	@property
	def short(self) -> bool:
		return self.acked < self.wanted


@dataclass(frozen=True)
class Due:
	"""What the due script found: Redis's clock, what to prepare now, and when to look again."""

	now_us: int
	entries: list[DueEntry]
	next_due_ms: int | None  # the next due fire, when none is due now
	next_prepared_ms: int | None  # the next prepared fire to release
	moved_aside: bool  # a set held a wrong value and was moved aside: the reconcile rebuilds it

	@classmethod
	def of(cls, raw: list) -> Due:
		"""The due script's reply: now, next due, next prepared, moved aside, then (member, score) pairs."""
		return cls(
			now_us=int(raw[0]),
			entries=[
				DueEntry(*parse_due_member(member), int(float(score))) for member, score in zip(raw[4::2], raw[5::2])
			],
			next_due_ms=int(float(raw[1])) if raw[1] else None,
			next_prepared_ms=int(float(raw[2])) if raw[2] else None,
			moved_aside=bool(int(raw[3])),
		)


@dataclass(frozen=True)
class ItemResult:
	"""Per item of a prepare: the jobs' outcomes, or why none was written."""

	outcome: str  # an ItemOutcome: WRITTEN (see jobs), STALE, CORRUPT or FAILED
	jobs: list[str]  # per job a JobOutcome, PREPARED or DUPLICATE (empty unless written)
	error: str = ""

	@classmethod
	def of(cls, result) -> ItemResult:
		if isinstance(result, list):
			return cls(ItemOutcome.WRITTEN, [text(o) for o in result])
		outcome, _, error = text(result).partition(": ")
		return cls(outcome, [], error)


@dataclass(frozen=True)
class Preparation:
	"""What the prepare script did: fenced (another process holds the lease: nothing written), or each item's result."""

	fenced: bool
	now_ms: int = 0  # Redis's clock
	results: list[ItemResult] = field(default_factory=list)

	@classmethod
	def of(cls, raw: list) -> Preparation:
		"""The prepare script's reply: "not_leader", or now then per item its jobs' outcomes or "<outcome>: <error>"."""
		if raw and text(raw[0]) == "not_leader":
			return cls(fenced=True)
		return cls(fenced=False, now_ms=int(raw[0]), results=[ItemResult.of(result) for result in raw[1:]])


@dataclass(frozen=True)
class Release:
	"""What one release script did: fenced (nothing released), or each fire whose moment came."""

	fenced: bool
	fires: list[Released] = field(default_factory=list)
	acks: Acks | None = None  # replicas holding every write up to this release (WAIT), None when none were waited for

	@classmethod
	def of(cls, raw: list, acks: Acks | None) -> Release:
		"""The release script's reply: "not_leader", or (member, outcome, lag) triples."""
		if raw and text(raw[0]) == "not_leader":
			return cls(fenced=True)
		return cls(fenced=False, fires=[Released.of(*fire) for fire in zip(raw[0::3], raw[1::3], raw[2::3])], acks=acks)

	@property
	def push_refused(self) -> bool:
		"""A queue refused a push: those fires stay prepared, to be tried again."""
		return any(fire.outcome == FireOutcome.PUSH_REFUSED for fire in self.fires)


class State:
	def __init__(self, redis_conn, keys: Keys, replica_ack_timeout_ms: int = 500, on_quarantine=None):
		"""`keys`: the bench's key names. `on_quarantine(what)` hears of each value this moves aside, "schedule_state"
		or "key" (for the metrics)."""
		self.redis = redis_conn
		self.keys = keys
		self.on_quarantine = on_quarantine or (lambda what: None)
		# Replicas each release waits for (`replication.Replication` sets it from those connected).
		self.replicas_wanted = 0
		self.replica_ack_timeout_ms = replica_ack_timeout_ms
		# Writes that change what a status shows (a site's schedules, invalid rows, fires, counters); the leader's
		# published status is built again only when this moved (`status.Publisher`). Counted where the write is known
		# to change something: the firing loop calls `release` on every step, mostly for nothing.
		self.changes = 0
		self._due = scripts.register(redis_conn, keys, "due")
		self._prepare = scripts.register(redis_conn, keys, "prepare")
		self._release = scripts.register(redis_conn, keys, "release")
		self._upsert = scripts.register(redis_conn, keys, "upsert")
		self._remove = scripts.register(redis_conn, keys, "remove")
		self._quarantine = scripts.register(redis_conn, keys, "quarantine")
		self._audit = scripts.register(redis_conn, keys, "audit")
		self._record = scripts.register(redis_conn, keys, "record")
		self._drop_due = scripts.register(redis_conn, keys, "drop_due")

	# -- wrong values ---------------------------------------------------------------------

	def quarantine(self, key: str, reason: str, *, site: str | None = None, schedule: str | None = None) -> None:
		"""Move `key` aside with the reason; a schedule's is also taken off the due set and rebuilt from its row."""
		member = due_member(site, schedule) if site is not None and schedule is not None else ""
		self._quarantine(keys=[key, self.keys.due], args=[reason, member])
		self.changes += 1
		self.on_quarantine("schedule_state" if member else "key")

	def guarded(self, key: str, read):
		"""`read()`, once more after moving `key` aside if it held the wrong type."""
		try:
			return read()
		except redis.ResponseError as exc:
			if not is_wrong_type(exc):
				raise
			self.quarantine(key, str(exc))
			return read()

	def audit(self, members: list[str]) -> tuple[int, int]:
		"""Check schedules ("<site>|<name>" of firing sites) against themselves and mend them, and drop junk
		from the prepared set (audit.lua): (due entries put right, states moved aside to be rebuilt)."""
		mended = moved = 0
		for start in range(0, max(len(members), 1), AUDIT_CHUNK):
			done = self._audit(keys=[self.keys.due, self.keys.prepared], args=members[start : start + AUDIT_CHUNK])
			mended, moved = mended + int(done[0]), moved + int(done[1])
		if mended or moved:
			self.changes += 1
		return mended, moved

	def check_types(self, sites: set[str]) -> list[str]:
		"""Move aside every key of BTU's (global, and the sites') that holds another type than BTU writes there;
		the keys moved. What a site's schedule set held is compiled again from the rows."""
		expected = expected_types(self.keys, sites)
		with self.redis.pipeline(transaction=False) as pipe:
			for key in expected:
				pipe.type(key)
			kinds = [text(kind) for kind in pipe.execute()]
		moved = []
		for (key, kind), found in zip(expected.items(), kinds):
			if found not in (kind, "none"):
				self.quarantine(key, f"holds a {found}, not a {kind}")
				moved.append(key)
		for site in sites:
			if self.keys.site_schedules_key(site) in moved:
				self.redis.sadd(self.keys.resync, due_member(site, RESYNC_ALL))
		return moved

	def take_resync(self) -> set[str]:
		"""The "<site>|<schedule>" members (or "*") whose state is to be rebuilt from the rows, taken off the set."""
		members = self.guarded(self.keys.resync, lambda: self.redis.spop(self.keys.resync, 10_000))
		return {text(m) for m in members or []}

	# -- generation: detecting that Redis lost the state -----------------------------

	def generation(self) -> str:
		"""The state's generation, made when missing (a new or wiped Redis)."""

		def read():
			self.redis.set(self.keys.generation, uuid.uuid4().hex, nx=True)
			return text(self.redis.get(self.keys.generation))

		return self.guarded(self.keys.generation, read)

	# -- reconcile side ------------------------------------------------------------------

	def upsert_many(self, site: str, upserts: list[CompiledSchedule]) -> list[str]:
		"""Run the upsert script for each schedule, pipelined; returns each result."""
		if not upserts:
			return []
		names = [entry.name for entry in upserts]
		# One round trip a site, the site's listing and its invalid rows' clearing included: a cold start upserts a
		# thousand sites one after another. By sha, not through redis-py's script objects, which ask Redis whether the
		# script is loaded before each pipeline (a round trip more); a Redis that lost its scripts gets it loaded.
		for attempt in (1, 2):
			with self.redis.pipeline(transaction=False) as pipe:
				for entry in upserts:
					keys = upsert_keys(self.keys, site, entry.name)
					pipe.evalsha(self._upsert.sha, len(keys), *keys, *entry.args(site), JOB_KEY_PREFIX)
				pipe.sadd(self.keys.sites, site)
				pipe.hdel(self.keys.invalid_rows_key(site), *names)
				*results, listed, cleared = pipe.execute(raise_on_error=False)
			if attempt == 1 and any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
				self.redis.script_load(self._upsert.script)
				continue
			break
		self.changes += 1  # upserts come only for rows whose checksum moved
		for result in results:
			if isinstance(result, Exception):
				raise result
		if isinstance(listed, Exception):
			self.guarded(self.keys.sites, lambda: self.redis.sadd(self.keys.sites, site))
		if isinstance(cleared, Exception):
			self.clear_invalid(site, *names)
		return [text(r) for r in results]

	def remove(self, site: str, name: str, client=None) -> bool:
		"""Take a schedule out of the state, withdrawing its prepared fires; True when it was there."""
		keys = [*upsert_keys(self.keys, site, name)]
		self.changes += 1
		return bool(self._remove(keys=keys, args=[due_member(site, name), name, JOB_KEY_PREFIX], client=client))

	def names(self, site: str) -> set[str]:
		key = self.keys.site_schedules_key(site)
		try:
			names = self.redis.smembers(key)
		except redis.ResponseError as exc:
			if not is_wrong_type(exc):
				raise
			# The site's list of schedules is gone with it: every one of them is compiled again.
			self.quarantine(key, str(exc))
			self.redis.sadd(self.keys.resync, due_member(site, RESYNC_ALL))
			names = set()
		return {text(n) for n in names}

	def present(self, site: str, names: list[str]) -> dict[str, bool]:
		"""Whether each schedule of `site` is in the state, in one round trip."""
		key = self.keys.site_schedules_key(site)
		with self.redis.pipeline(transaction=False) as pipe:
			for name in names:
				pipe.sismember(key, name)
			return dict(zip(names, map(bool, pipe.execute())))

	def sites(self) -> set[str]:
		return {text(s) for s in self.guarded(self.keys.sites, lambda: self.redis.smembers(self.keys.sites))}

	def hold_site(self, site: str) -> None:
		"""Take a paused site's schedules off the due set; their cursors stay."""
		members = [due_member(site, name) for name in self.names(site)]
		self.changes += 1
		for start in range(0, len(members), PURGE_CHUNK):
			self.redis.zrem(self.keys.due, *members[start : start + PURGE_CHUNK])

	def purge_site(self, site: str) -> None:
		"""Take a site out of the state, a chunk of schedules per round trip: each removal is its own short script,
		so Redis serves the fires of other sites in between."""
		names = sorted(self.names(site))
		for start in range(0, len(names), PURGE_CHUNK):
			with self.redis.pipeline(transaction=False) as pipe:
				for name in names[start : start + PURGE_CHUNK]:
					self.remove(site, name, client=pipe)
				pipe.execute()
		# Out of the sites set as its keys go, in one transaction: nobody sees a site listed without its keys or keys of
		# a site no longer listed, and a fire record that comes later is refused (record.lua).
		with self.redis.pipeline(transaction=True) as pipe:
			pipe.srem(self.keys.sites, site)
			self.changes += 1
			pipe.delete(
				self.keys.site_schedules_key(site),
				self.keys.recent_fires_key(site),
				self.keys.invalid_rows_key(site),
				self.keys.counters_key(site),
			)
			pipe.execute()

	def set_invalid(self, site: str, invalid: dict[str, str], *, replace: bool) -> None:
		key = self.keys.invalid_rows_key(site)
		self.changes += 1

		def write():
			with self.redis.pipeline() as pipe:
				if replace:
					pipe.delete(key)
				if invalid:
					pipe.hset(key, mapping=invalid)
				pipe.execute()

		self.guarded(key, write)

	def invalid_names(self, site: str) -> set[str]:
		key = self.keys.invalid_rows_key(site)
		return {text(n) for n in self.guarded(key, lambda: self.redis.hkeys(key))}

	def sites_with_invalid(self, sites: list[str]) -> set[str]:
		"""Which of `sites` have invalid rows listed, in one round trip (a full reconcile compiles those again)."""
		with self.redis.pipeline(transaction=False) as pipe:
			for site in sites:
				pipe.exists(self.keys.invalid_rows_key(site))
			return {site for site, found in zip(sites, pipe.execute()) if found}

	def clear_invalid(self, site: str, *names: str) -> None:
		key = self.keys.invalid_rows_key(site)
		if names:
			self.changes += 1
			self.guarded(key, lambda: self.redis.hdel(key, *names))

	# -- leader side ---------------------------------------------------------------------

	def due(self, batch_size: int, ahead_ms: int = 0, held_ms: int | None = None) -> Due:
		"""What is due: fire time at most `ahead_ms` from now, so the leader can prepare it before its moment; with
		`held_ms`, none due more than that long ago (a catch-up held back)."""
		args = [batch_size, ahead_ms, *([] if held_ms is None else [held_ms])]
		return Due.of(self._due(keys=[self.keys.due, self.keys.prepared], args=args))

	def read(self, entries: list[DueEntry]) -> list[dict | Exception]:
		"""Each schedule's state fields with its "spec" and "job" from its definition, or the error reading them raised
		(a key of the wrong type)."""
		with self.redis.pipeline(transaction=False) as pipe:
			for entry in entries:
				pipe.hmget(self.keys.schedule_key(entry.site, entry.schedule), STATE_FIELDS)
				pipe.get(self.keys.definition_key(entry.site, entry.schedule))
			replies = pipe.execute(raise_on_error=False)
		return states_of(replies)

	def record_fires(self, fires: list[tuple[str, dict]]) -> None:
		"""Add (site, fire_record) pairs to each site's recent fires, keeping the newest RECENT_FIRES.

		Written after the fires, not with them: it is a record for people, and
		keeping it out of the release script keeps that script short.
		"""
		self.changes += 1
		by_site: dict[str, list[str]] = {}
		for site, fire in fires:
			by_site.setdefault(site, []).append(json.dumps(fire))
		with self.redis.pipeline(transaction=False) as pipe:
			for site, records in by_site.items():
				keys = [self.keys.sites, self.keys.recent_fires_key(site)]
				self._record(keys=keys, args=[site, RECENT_FIRES, *records[-RECENT_FIRES:]], client=pipe)
			pipe.execute()

	def drop_due(self, schedules: list[tuple[str, str, str]]) -> int:
		"""Take (site, schedule, fingerprint read)s off the due set: removed meanwhile ('' read), or they cannot be
		planned. One that an upsert changed since keeps its entry (drop_due.lua); how many were dropped."""
		if not schedules:
			return 0
		args = [
			value for site, schedule, fingerprint in schedules for value in (due_member(site, schedule), fingerprint)
		]
		self.changes += 1
		return int(self._drop_due(keys=[self.keys.due], args=args))

	def prepare(self, lease_value: str, stamp: str, grace_ms: int, items: list[FireItem]) -> Preparation:
		"""Run the prepare script: claim each item's slots and write its jobs, on no queue yet.
		`stamp`: the jobs' created_at (rq's format)."""
		self.changes += 1  # the schedules' next fires move on
		return Preparation.of(
			self._prepare(
				keys=[self.keys.leader, self.keys.due, self.keys.prepared],
				args=prepare_args(self.keys, lease_value, stamp, grace_ms, items),
			)
		)

	def release(self, lease_value: str, batch_size: int, grace_ms: int) -> Release:
		"""Release up to `batch_size` prepared fires whose moment has come.

		A fire found more than `grace_ms` late (no leader was up at its moment) is returned to its schedule,
		whose catch-up policy then decides, as for any missed slot.
		"""
		return Release.of(
			*self.durably(
				self._release,
				[self.keys.leader, self.keys.prepared, QUEUES_KEY, self.keys.due],
				[lease_value, batch_size, JOB_KEY_PREFIX, grace_ms],
			)
		)

	def durably(self, script, keys: list, args: list) -> tuple:
		"""Run a fire script, then WAIT on the same connection for `replicas_wanted` replicas to hold its writes
		(up to `replica_ack_timeout_ms`): (its reply, the acknowledgements or None when none were wanted).

		Only releases wait: replication is one ordered stream, so a replica that acknowledges a release holds
		every claim prepared before it, and one WAIT per release costs what one per prepare batch would
		cost twenty times over (docs/PERFORMANCE.md)."""
		wanted = self.replicas_wanted
		if not wanted:
			return script(keys=keys, args=args), None
		with self.redis.pipeline(transaction=False) as pipe:
			script(keys=keys, args=args, client=pipe)
			pipe.wait(wanted, self.replica_ack_timeout_ms)
			raw, acked = pipe.execute()
		return raw, Acks(int(acked), wanted)


def global_types(keys: Keys) -> dict[str, str]:
	"""The type of each global key BTU writes (check_types)."""
	return {
		keys.due: "zset",
		keys.prepared: "zset",
		keys.sites: "set",
		keys.generation: "string",
		keys.leader_epoch: "string",
		keys.processes: "zset",
		keys.commands: "list",
		keys.resync: "set",
		keys.quarantine: "hash",
	}


# Schedules removed per round trip when a site goes: each removal is one short script.
PURGE_CHUNK = 100
# Schedules checked per audit script: about 2 µs of Redis each.
AUDIT_CHUNK = 1000


def expected_types(keys: Keys, sites: set[str]) -> dict[str, str]:
	"""The type each key of BTU's holds: the global keys' and those of `sites`."""
	expected = global_types(keys)
	for site in sites:
		expected.update(
			{
				keys.site_schedules_key(site): "set",
				keys.counters_key(site): "hash",
				keys.invalid_rows_key(site): "hash",
				keys.recent_fires_key(site): "list",
			}
		)
	return expected


def states_of(replies: list) -> list[dict | Exception]:
	"""`State.read`'s pipeline replies (each schedule's state fields, then its definition) as each schedule's state,
	or the wrong-type error reading it raised; any other error is raised."""
	out: list[dict | Exception] = []
	for values, definition in zip(replies[::2], replies[1::2]):
		error = next((reply for reply in (values, definition) if isinstance(reply, Exception)), None)
		if error is not None:
			if not isinstance(error, redis.ResponseError) or not is_wrong_type(error):
				raise error
			out.append(error)
			continue
		state = {field: text(v) for field, v in zip(STATE_FIELDS, values)}
		if definition is not None:
			state["spec"], _, state["job"] = text(definition).partition("\n")
		out.append(state)
	return out


def upsert_keys(keys: Keys, site: str, name: str) -> list[str]:
	"""KEYS of upsert.lua and remove.lua."""
	return [
		keys.schedule_key(site, name),
		keys.due,
		keys.site_schedules_key(site),
		keys.prepared,
		keys.prepared_index_key(site, name),
		keys.definition_key(site, name),
	]


def is_wrong_type(exc: Exception) -> bool:
	return str(exc).startswith("WRONGTYPE")


def text(value: bytes | str | None) -> str | None:
	"""A Redis reply as str (the clients may or may not decode)."""
	return value.decode() if isinstance(value, bytes) else value
