"""The BTU scheduler process.

It fires every BTU Task Schedule of every site of a bench by writing RQ jobs
on the sites' own queues. It never imports frappe: it reads the bench's
directory layout and config files, reads schedule rows from each site's
database with SQL, and keeps its runtime state in Redis.
"""
