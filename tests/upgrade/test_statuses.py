"""The original Log's success_fail as this BTU's status."""

from __future__ import annotations

import json
from pathlib import Path

from btu.btu_core.upgrade.convert.statuses import LOG_STATUS, log_status

LOG_JSON = Path(__file__).resolve().parents[2] / "btu/btu_core/doctype/btu_task_log/btu_task_log.json"


def test_each_original_status_maps_to_one_of_ours():
	options = next(
		f["options"] for f in json.loads(LOG_JSON.read_text())["fields"] if f["fieldname"] == "status"
	).split("\n")
	assert set(LOG_STATUS) == {"In-Progress", "Success", "Failed", "Timeout"}
	assert all(value in options for value in LOG_STATUS.values())
	assert log_status("Success") == ("Succeeded", True)
	assert log_status("Timeout") == ("Timed Out", True)
	assert log_status("In-Progress") == ("Started", True)


def test_an_unknown_status_is_flagged():
	assert log_status("Maybe") == ("Failed", False)
	assert log_status(None) == ("Failed", False)
