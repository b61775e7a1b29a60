"""BTU on a site: `install` (install, uninstall and migrate hooks), `roles` (BTU's roles and the checks of who may do
what), `log_access` (who reads which Task Log: BTU Task Log's permission hooks)."""
