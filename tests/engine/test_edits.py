"""An edit announced over the RPC protocol takes effect at once, whichever scheduler process takes the command."""

from __future__ import annotations

import time

import pytest

from btu.shared import protocol
from btu.shared.keys import due_member
from tests.engine.helpers import (
	ONE_SECOND,
	queue_ids,
	queue_key,
	recent_fires,
	report,
	slots_by_schedule,
	state_names,
	wait_for_leader,
	wait_until,
)
from tests.support.keys import KEYS

# A 300 s refresh and a 30 s lease (renewed every 10 s): only the RPC command and its wake can explain a quick effect.
FLAGS = ("--full-refresh-interval-secs", "300", "--lease-ttl-secs", "30")


@pytest.mark.parametrize("taker", ["leader", "standby"])
def test_rpc_create_and_cancel_take_effect_at_once(taker, engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 0 1 1 *")
	member = due_member(site, name)
	if taker == "leader":
		leader = processes.scheduler(bench.path, *FLAGS)
	else:
		leader = processes.scheduler(bench.path, *FLAGS, "--disable-redis-rpc", "true")
	assert wait_for_leader(r, processes) is leader
	if taker == "standby":
		standby = processes.scheduler(bench.path, *FLAGS)
		wait_until(lambda: " rpc_listener_started " in standby.log(), 20, "the standby listens")
	wait_until(lambda: r.zscore(KEYS.due, member), 20, "the yearly schedule is in the state")
	yearly_fire_at = r.zscore(KEYS.due, member)
	time.sleep(1)  # the leader is asleep now, until its next renewal in ~10 s

	data.update_schedule(name, cron_string=ONE_SECOND)
	sent = time.time()
	reply = protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, name, site=site)
	assert reply.ok, reply.message
	wait_until(
		lambda: (r.zscore(KEYS.due, member) or yearly_fire_at) < yearly_fire_at,
		5,
		"the new cron in the state",
		0.002,
	)
	applied = time.time()
	applied_ms = (applied - sent) * 1000
	fire = wait_until(
		lambda: next((f for f in recent_fires(r, site) if f["schedule"] == name), None),
		5,
		"a fire of the new cron",
		0.005,
	)
	assert fire["slot_ms"] <= applied * 1000 + 1000 + 5, "the first slot after the edit fired"
	assert fire["lag_ms"] < 1000, "the leader woke for the new slot instead of sleeping until its renewal"

	data.update_schedule(name, enabled=0)
	sent_cancel = time.time()
	reply = protocol.call(r, KEYS, protocol.CANCEL_TASK_SCHEDULE, name, site=site)
	assert reply.ok, reply.message
	wait_until(
		lambda: name not in state_names(r, site) and r.zscore(KEYS.due, member) is None,
		5,
		"the schedule left the state",
		0.002,
	)
	cancelled_ms = (time.time() - sent_cancel) * 1000
	time.sleep(2.5)
	late = [
		slot
		for slot in slots_by_schedule(queue_ids(r, queue_key(bench))).get(name, [])
		if slot > sent_cancel * 1000 + 1000
	]
	assert late == [], "a cancelled schedule fired"
	assert leader.alive()
	if taker == "standby":
		assert " rpc_listener_started " not in leader.log(), "only the standby could take the commands"
	report(
		f"RPC edit taken by the {taker}",
		f"create_task_schedule -> new cron in the state: {applied_ms:.0f} ms, first fire lag {fire['lag_ms']} ms; "
		f"cancel_task_schedule -> out of the state: {cancelled_ms:.0f} ms (round trips include the 5 ms polling)",
	)


def test_a_forged_cancel_does_not_silence_an_enabled_schedule(engine_bench, processes, r):
	"""cancel_task_schedule re-reads the row: enabled keeps firing, disabled or deleted leaves the state."""
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	kept, disabled, deleted = (
		data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND) for _ in range(3)
	)
	processes.scheduler(bench.path, *FLAGS)
	wait_until(
		lambda: {kept, disabled, deleted} <= set(slots_by_schedule(queue_ids(r, queue_key(bench)))),
		30,
		"all three fire",
	)

	data.update_schedule(disabled, enabled=0)
	data.delete_schedule(deleted)
	for name in (kept, kept, disabled, deleted):  # the forged one twice, as a replay would
		reply = protocol.call(r, KEYS, protocol.CANCEL_TASK_SCHEDULE, name, site=site)
		if name == deleted and not reply.ok:
			# The staggered reconcile took the deleted row out of the state before its cancel came: the cancel then
			# names a schedule neither the table nor the state has, and is refused as such.
			assert "has no BTU Task Schedule of that name" in reply.message and deleted not in state_names(r, site), (
				reply.message
			)
			continue
		assert reply.ok, reply.message
	sent_ms = time.time() * 1000
	wait_until(
		lambda: not {disabled, deleted} & state_names(r, site),
		5,
		"the disabled and the deleted schedule left the state",
		0.01,
	)
	time.sleep(2.5)
	fired = slots_by_schedule(queue_ids(r, queue_key(bench)))
	assert kept in state_names(r, site)
	assert [slot for slot in fired[kept] if slot > sent_ms + 1000], (
		"the enabled schedule stopped firing after a forged cancel"
	)
	assert not [slot for name in (disabled, deleted) for slot in fired[name] if slot > sent_ms + 1000]
