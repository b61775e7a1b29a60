"""Every Redis key and channel BTU owns, named by one immutable `Keys` per bench.

Seed 000 names them all under "btu:". Benches that share one Redis server (hosting providers,
frappe_docker's shared services) would share those keys: one lease, one command list, and a site's keys
whichever bench it is in. `btu_namespace` in a bench's common_site_config.json gives that bench keys of
its own, "btu@<namespace>:...", which no pattern of seed 000's keys ("btu:*") matches, so an ACL grant
covers one bench's keys only. Each half makes its bench's `Keys` once it knows the bench
(`btu.scheduler_daemon.reads.bench.Bench.keys`, `btu.btu_core.scheduler_link.bench_keys`) and hands it to
what names a key; `Keys()` is seed 000's names. As rq's `Job` keeps its key prefix as an attribute, a
`Keys` keeps its prefix, and every name is that prefix and a fixed suffix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

NAMESPACE_SETTING = "btu_namespace"
NAMESPACE_FORM = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
SEED_PREFIX = "btu:"
# A site's keys, as templates of their suffix: `Keys` fills them in Python, and the Lua scripts get functions of the
# same names (`btu.scheduler_daemon.store.scripts`), so that no script spells a key itself.
SITE_KEY_SUFFIXES = {
	# Hash: the schedule's state: name, fingerprint, cursor (pending slot, ms), fire_at, runs, paused, finished,
	# modified (its spec and job template: definition_key).
	"schedule_key": "site:{site}:schedule:{schedule}",
	# String: the schedule's spec and job template, two JSON documents a newline apart. Kept out of its state hash
	# so that the hash stays a listpack: Redis keeps a hash with a value over hash-max-listpack-value (64 bytes) as a
	# hash table, and the two documents are hundreds of bytes (1,658 bytes a schedule in one hash, 1,136 apart).
	"definition_key": "site:{site}:definition:{schedule}",
	# Sorted set: the schedule's members of the prepared set, so that withdrawing them touches no other's.
	"prepared_index_key": "site:{site}:prepared:{schedule}",
	# Set of the schedule names this site has in the state.
	"site_schedules_key": "site:{site}:schedules",
	# Capped list of the newest fires (JSON), newest first.
	"recent_fires_key": "site:{site}:fires",
	# Hash: schedule name -> why its row was kept out of the state.
	"invalid_rows_key": "site:{site}:invalid",
	# Hash of per-site counters: fired, skipped_overlap, missed, expired, ...
	"counters_key": "site:{site}:counters",
	# Set of the job ids release.lua queued for a Task with a concurrency limit, while they may be queued or
	# started: each check drops those that are not (lua/release.lua).
	"task_running_key": "site:{site}:running:{task}",
}
# The highest BTU Task.max_concurrent_runs: a release script reads the status of every job in a limited Task's
# running set (task_running_key) once per script.
MAX_CONCURRENT_RUNS = 100
# A resync member naming every schedule ("*"), or every schedule of a site ("<site>|*").
RESYNC_ALL = "*"
# Long against the heartbeat that refreshes a Frappe-jobs acknowledgement (5 s) and against a failover (a new leader
# acknowledges after its first full reconcile), short against Frappe's tick (60 s on v15): Frappe fires again within
# a tick or two of the leader's death.
FRAPPE_JOBS_ACK_TTL_SECONDS = 30


def namespace_problem(namespace) -> str | None:
	"""Why `namespace` cannot name a bench's keys, or None (None and "" mean no namespace)."""
	if namespace in (None, ""):
		return None
	if not isinstance(namespace, str) or not NAMESPACE_FORM.match(namespace):
		return (
			f"{NAMESPACE_SETTING} {namespace!r} in common_site_config.json: "
			"give 1 to 64 letters, digits, '_', '.' or '-' "
			"(a name no other bench on the same Redis uses, such as the bench's id), or remove it"
		)
	return None


@dataclass(frozen=True, repr=False)
class Keys:
	"""A bench's key names: `Keys(namespace)`; a namespace `namespace_problem` refuses raises ValueError."""

	namespace: str | None = None
	prefix: str = field(init=False)
	# The RPC (seed 000): the command list, and the prefix of every caller's response key.
	commands: str = field(init=False)
	response_prefix: str = field(init=False)
	# The leader lease: value "<epoch>|<holder>", set with PX so Redis's own clock times it out. The epoch (INCR of
	# leader_epoch) is the fencing token.
	leader: str = field(init=False)
	leader_epoch: str = field(init=False)
	# Every scheduler process subscribes to both: a process that changed the state publishes on wake_channel so the
	# leader recomputes its sleep at once; a leader that steps down publishes on handoff_channel so a standby takes
	# over at once.
	wake_channel: str = field(init=False)
	handoff_channel: str = field(init=False)
	# JSON summary for the Desk and `btu-scheduler status`.
	status: str = field(init=False)
	# Sorted set of scheduler processes scored by their last heartbeat (epoch ms), and per process (process_key) a
	# JSON hash of who it is, expiring with its heartbeat.
	processes: str = field(init=False)
	# One sorted set for every site: member "<site>|<schedule>" (due_member), score = the fire time in epoch ms.
	due: str = field(init=False)
	# Fires prepared ahead of their moment (job hash written, on no queue yet): score = fire time in epoch ms,
	# member = what the release step needs (btu.scheduler_daemon.store.state.Prepared).
	prepared: str = field(init=False)
	sites: str = field(init=False)
	# State that held a wrong value (another type, junk members, text where a number belongs) is moved aside, never
	# fired from and never fatal (lua/guard.lua): quarantine is a hash, what was moved -> JSON {reason, at_ms,
	# detail}; a moved key lives on, for a week, as quarantined_prefix + its name. resync holds "<site>|<schedule>"
	# members whose state is to be rebuilt from the database row (RESYNC_ALL for all of a site's, or for all).
	quarantine: str = field(init=False)
	quarantined_prefix: str = field(init=False)
	resync: str = field(init=False)
	# A random value written when the state is first built: when it is gone, Redis lost its data and every process
	# rebuilds from the databases.
	generation: str = field(init=False)
	process_prefix: str = field(init=False)
	task_outcomes_prefix: str = field(init=False)
	frappe_jobs_ack_prefix: str = field(init=False)
	# The ACL key pattern of every key here: the one grant a caller (the Desk, `ping`, `status`) needs.
	grant: str = field(init=False)
	# Each site key's name (SITE_KEY_SUFFIXES) -> its template, with "{site}" and "{schedule}" or "{task}" to fill.
	site_key_templates: Mapping[str, str] = field(init=False, compare=False, repr=False)

	def __post_init__(self):
		problem = namespace_problem(self.namespace)
		if problem:
			raise ValueError(problem)
		prefix = f"btu@{self.namespace}:" if self.namespace else SEED_PREFIX
		names = {
			"namespace": self.namespace or None,
			"prefix": prefix,
			"commands": "scheduler:commands",
			"response_prefix": "scheduler:rpc:",
			"leader": "scheduler:leader",
			"leader_epoch": "scheduler:leader:epoch",
			"wake_channel": "scheduler:wake",
			"handoff_channel": "scheduler:handoff",
			"status": "scheduler:status",
			"processes": "scheduler:processes",
			"due": "due",
			"prepared": "prepared",
			"sites": "sites",
			"quarantine": "quarantine",
			"quarantined_prefix": "quarantined:",
			"resync": "resync",
			"generation": "generation",
			"process_prefix": "scheduler:process:",
			"task_outcomes_prefix": "task_outcomes:",
			"frappe_jobs_ack_prefix": "frappe-jobs:ack:",
		}
		for name, suffix in names.items():
			object.__setattr__(self, name, suffix if name in ("namespace", "prefix") else prefix + suffix)
		object.__setattr__(self, "grant", f"~{prefix}*")
		templates = {name: prefix + suffix for name, suffix in SITE_KEY_SUFFIXES.items()}
		object.__setattr__(self, "site_key_templates", MappingProxyType(templates))

	def __repr__(self) -> str:
		return f"Keys({self.namespace!r})"

	def process_key(self, process_id: str) -> str:
		return f"{self.process_prefix}{process_id}"

	def schedule_key(self, site: str, schedule: str) -> str:
		return self.site_key_templates["schedule_key"].format(site=site, schedule=schedule)

	def definition_key(self, site: str, schedule: str) -> str:
		return self.site_key_templates["definition_key"].format(site=site, schedule=schedule)

	def prepared_index_key(self, site: str, schedule: str) -> str:
		return self.site_key_templates["prepared_index_key"].format(site=site, schedule=schedule)

	def site_schedules_key(self, site: str) -> str:
		return self.site_key_templates["site_schedules_key"].format(site=site)

	def recent_fires_key(self, site: str) -> str:
		return self.site_key_templates["recent_fires_key"].format(site=site)

	def invalid_rows_key(self, site: str) -> str:
		return self.site_key_templates["invalid_rows_key"].format(site=site)

	def counters_key(self, site: str) -> str:
		return self.site_key_templates["counters_key"].format(site=site)

	def task_running_key(self, site: str, task: str) -> str:
		return self.site_key_templates["task_running_key"].format(site=site, task=task)

	def task_outcomes_key(self, site: str) -> str:
		"""Hash per site: what finished runs counted, for Prometheus (btu.btu_core.insights.task_outcomes). The Frappe
		side's task runner writes it and its metrics endpoint reads it; the scheduler neither. So it is outside the
		site keys (the scheduler's state, whose keys it type-checks, quarantines and purges): a site the scheduler
		purges or a state it rebuilds keeps its counts."""
		return f"{self.task_outcomes_prefix}{site}"

	def frappe_jobs_ack_key(self, bench_id: str, site: str) -> str:
		"""The leader's acknowledgement that it fires a site's Frappe Scheduled Job Types now: value the lease token,
		refreshed with each heartbeat and expiring FRAPPE_JOBS_ACK_TTL_SECONDS after the last refresh, deleted when
		the leader stops firing them or steps down. Frappe's tick stands back for a job type only while its site's key
		exists. The bench id is in the key because benches can share one Redis with sites of the same name, and each
		must stand back only for a scheduler of its own bench. Site names hold no ":" (bench.py refuses them), so the
		key reads unambiguously from the right whatever the bench id holds."""
		return f"{self.frappe_jobs_ack_prefix}{bench_id}:{site}"


def due_member(site: str, schedule: str) -> str:
	"""A schedule's member of the due and resync sets. Site names never contain "|"."""
	return f"{site}|{schedule}"


def parse_due_member(member: str | bytes) -> tuple[str, str]:
	if isinstance(member, bytes):
		member = member.decode()
	site, _, schedule = member.partition("|")
	return site, schedule
