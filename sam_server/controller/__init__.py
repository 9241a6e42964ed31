"""The controller: SAM's leader-elected control loop, run by `sam scheduler`.

One leader at a time (`leader`) reads the database into the policy's `Snapshot` (`snapshot`,
`gates`), runs the pure policy's `plan()` (`sam_server.scheduling`), applies its decisions through
the service verbs (`decisions` -> `services/dispatch.py`), reaps expired leases (`reaper`), and
sends the Celery messages it wrote in the same transaction once that commits (transactional
outbox). Not to be confused with `sam_server.scheduling`, the pure policy it calls, or with
`sam_server.replay`, the trace replay (`sam sim`) that calls the same policy in simulated time."""
