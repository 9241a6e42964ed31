"""The trace replay behind `sam sim`: SWF traces run through the pure policy in simulated time.

It sits beside the policy (`sam_server.scheduling`), not inside it: the replay depends on the
policy, never the reverse, and imports no database, broker, service, API or controller (both
rules are `.importlinter` contracts). `swf` reads the traces, `sim` drives `plan()` over a
simulated cluster of wafers, `oned` is the geometry-free one-dimensional EASY baseline,
`metrics` computes the figures printed, and `cli` is the `sam sim` command.
"""
