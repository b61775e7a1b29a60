"""Taking schedules off the due set never undoes an upsert that came in between (drop_due.lua)."""

from __future__ import annotations

from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from btu.shared.keys import due_member
from tests.support.keys import KEYS

SITE = "site1.localhost"


def due_entry(r, schedule: str, fingerprint: str | None, score: int = 1_000) -> None:
	if fingerprint is not None:
		r.hset(
			KEYS.schedule_key(SITE, schedule),
			mapping={"fingerprint": fingerprint, "cursor": str(score), "fire_at": str(score)},
		)
	r.zadd(KEYS.due, {due_member(SITE, schedule): score})


def on_due_set(r, schedule: str) -> bool:
	return r.zscore(KEYS.due, due_member(SITE, schedule)) is not None


def test_only_what_is_still_as_read_leaves_the_due_set(r):
	due_entry(r, "removed", None)  # read gone, still gone
	due_entry(r, "restored", "f-new")  # read gone, then upserted again
	due_entry(r, "broken", "f-bad")  # read with a spec that cannot be planned, unchanged
	due_entry(r, "fixed", "f-fixed")  # read broken, then edited: a new fingerprint
	dropped = State(r, KEYS).drop_due([
		(SITE, "removed", ""), (SITE, "restored", ""), (SITE, "broken", "f-bad"), (SITE, "fixed", "f-bad"),
		(SITE, "never-due", ""),
	])  # fmt: skip
	assert dropped == 2
	assert not on_due_set(r, "removed") and not on_due_set(r, "broken")
	assert on_due_set(r, "restored") and on_due_set(r, "fixed")


def test_a_state_of_the_wrong_type_is_left_for_the_audit(r):
	r.set(KEYS.schedule_key(SITE, "odd"), "not a hash")
	r.zadd(KEYS.due, {due_member(SITE, "odd"): 1})
	assert State(r, KEYS).drop_due([(SITE, "odd", "")]) == 0
	assert on_due_set(r, "odd")


def test_nothing_to_drop_sends_nothing(r):
	assert State(r, KEYS).drop_due([]) == 0
