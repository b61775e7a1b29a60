"""What an app writes to declare the functions the original BTU ran undeclared."""

from __future__ import annotations

from btu.shared.declared import HOOK


def app_of(path: str) -> str:
	"""The app a dotted function path belongs to: its first segment."""
	return (path or "").strip().split(".")[0]


def hook_line(path: str) -> str:
	"""The `btu_tasks` entry that declares `path`, for `<app>/hooks.py`."""
	return f'{HOOK} = ["{path.strip()}"]'


def hooks_block(app: str, paths) -> str:
	"""A `btu_tasks` block for `app`'s hooks.py declaring those of `paths` that are its own (only an app's own
	hooks declare its functions), one per line, sorted; "" when none is."""
	own = sorted({path.strip() for path in paths if app_of(path) == app})
	if not own:
		return ""
	lines = "".join(f'\t"{path}",\n' for path in own)
	return (
		"# Declared for BTU: the functions its Tasks ran before the upgrade from the original BTU.\n"
		f"{HOOK} = [\n{lines}]\n"
	)
