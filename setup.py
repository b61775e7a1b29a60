from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent


def read_version() -> str:
	for line in (HERE / "btu" / "__init__.py").read_text().splitlines():
		if line.startswith("__version__"):
			return line.split("=", 1)[1].strip().strip("\"'")
	raise RuntimeError("btu/__init__.py has no __version__")


def read_requirements() -> list[str]:
	lines = (HERE / "requirements.txt").read_text().splitlines()
	return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


setup(
	name="btu",
	version=read_version(),
	description="Background Tasks Unleashed: a precise, highly available task scheduler for Frappe",
	long_description=(HERE / "README.md").read_text() if (HERE / "README.md").exists() else "",
	long_description_content_type="text/markdown",
	author="BTU contributors",
	license="MIT",
	python_requires=">=3.10",
	packages=find_packages(include=["btu", "btu.*"]),
	include_package_data=True,
	package_data={"btu": ["**/*.json", "**/*.js", "**/*.lua", "**/*.txt", "**/*.md", "**/*.html", "**/*.css"]},
	zip_safe=False,
	install_requires=read_requirements(),
	extras_require={
		"postgres": ["psycopg2-binary>=2.9.1"],
		# selenium: tier 2's browser tests drive Debian's chromium through chromium-driver (scripts/tier2 installs it).
		"test": ["pytest>=7", "hypothesis>=6", "selenium>=4.20"],
	},
	entry_points={"console_scripts": ["btu-scheduler=btu.scheduler_daemon.cli:main"]},
	classifiers=[
		"Framework :: Frappe",
		"License :: OSI Approved :: MIT License",
		"Programming Language :: Python :: 3.10",
		"Programming Language :: Python :: 3.11",
		"Programming Language :: Python :: 3.12",
		"Programming Language :: Python :: 3.14",
	],
)
