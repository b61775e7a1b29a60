"""Functions the tier-2 tests run as BTU Tasks."""

from __future__ import annotations

import logging
import sys
import time

import frappe


def say_hello(name: str = "world", punctuation: str = "!") -> dict:
	print(f"hello {name}{punctuation}")
	print(f"warning for {name}", file=sys.stderr)
	logging.getLogger("btu.sample").info("greeted %s", name)
	return {"greeted": name}


def needs_company(company: str, dry_run: bool = False) -> dict:
	return {"company": company, "dry_run": dry_run}


def insert_then_fail(marker: str) -> None:
	frappe.get_doc({"doctype": "ToDo", "description": marker}).insert(ignore_permissions=True)
	print(f"inserted {marker}")
	raise RuntimeError(f"failing after inserting {marker}")


def sleep_for(seconds: float) -> None:
	print("going to sleep")
	time.sleep(seconds)
	print("woke up")


def shout(size: int) -> None:
	sys.stdout.write("x" * size)


NOT_A_FUNCTION = 42
