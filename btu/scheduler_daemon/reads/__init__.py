"""What the scheduler reads, never writes: the bench and its sites' databases.

The bench's layout and site configs (`bench.py`), the apps' declared functions (`app_files.py`), each site's database by
SQL (`database.py`) over bounded connections (`connections.py`), many sites a query (`server_read.py`, `db_reader.py`
for the reader login), what a reconcile reads of a site first (`site_read.py`, read by `site_reader.py`; its settings:
`site_settings.py`), and in `sources/` the rows of each kind of run.
"""
