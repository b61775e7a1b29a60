"""The benchmarks' dev benches install this package as an app (benchmarks.common.DevBench):
this declares the job the rq executor runs (btu.shared.declared), read by the scheduler without importing it."""

btu_tasks = ["benchmarks.jobs.record"]
