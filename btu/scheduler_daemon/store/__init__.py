"""What the scheduler keeps in Redis: `state.py` is the one module that writes it (schedule states, the due and prepared
sets, fires, counters, quarantine), through the Lua scripts in `lua/` (`scripts.py` loads them with the bench's key
names); `jobs.py` is the rq job they write (its id, hash and queue), `fires.py` what they take and give, and
`outcomes.py` names what they report. Every other room reads and writes the state through `State`.
"""
