"""The original BTU's text schedule hours as numbers, before the DocTypes sync makes the column an Int."""

from btu.btu_core.upgrade import hours


def execute():
	hours.execute()
