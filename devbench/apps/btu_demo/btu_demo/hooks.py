"""The dev bench's own app: every dev bench links it into apps/ and lists it in sites/apps.txt.

Its `btu_tasks` declares the demo's functions, so the scheduler (which reads this file with `ast`,
never running it) lets the demo's schedules run them; no production site installs this app.
"""

app_name = "btu_demo"
app_title = "BTU Demo"
app_publisher = "BTU contributors"
app_description = "Sample task functions for BTU's dev benches and demo"
app_license = "MIT"

btu_tasks = ["btu_demo.demo_tasks.*"]
