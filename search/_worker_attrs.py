"""The system attrs by which a journal study's running trial names its worker (see `storage.WorkerHeartbeat`).

Their own module, so that the journal's reader (`journal_check`) and the storage share them.
"""

HOST_ATTR = "archdsl:host"
PID_ATTR = "archdsl:pid"
BEAT_ATTR = "archdsl:heartbeat"  # time.time() of the worker's last beat
