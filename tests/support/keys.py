"""The key names of the tests' benches: seed 000's, as none of them sets `btu_namespace`
(tests/scale/test_shared_redis.py makes benches that do, each with its own `Keys`)."""

from btu.shared.keys import Keys

KEYS = Keys()
