"""The original BTU's Tasks, Schedules and Logs converted in place; what could not be and the undeclared functions
printed."""

from btu.btu_core.upgrade import configuration


def execute():
	configuration.execute()
