"""The tables the upgrade reads and writes, named so a test can run it against tables of its own."""

from __future__ import annotations

from dataclasses import dataclass

import frappe


@dataclass(frozen=True)
class Tables:
	task: str = "tabBTU Task"
	schedule: str = "tabBTU Task Schedule"
	log: str = "tabBTU Task Log"

	def exists(self, table: str) -> bool:
		return bool(
			frappe.db.sql(
				"select 1 from information_schema.tables where table_schema = database() and table_name = %s", table
			)
		)

	def columns(self, table: str) -> dict[str, str]:
		"""A table's columns and their types ({} when there is no such table)."""
		return dict(
			frappe.db.sql(
				"select column_name, data_type from information_schema.columns where table_schema = database() and "
				"table_name = %s",
				table,
			)
		)


SITE = Tables()
