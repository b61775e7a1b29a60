app_name = "btu"
app_title = "Background Tasks Unleashed"
app_publisher = "BTU contributors"
app_description = "A precise, highly available task scheduler for Frappe, with per-run logs"
app_email = "btu@example.com"
app_license = "MIT"
required_apps = ["frappe"]
