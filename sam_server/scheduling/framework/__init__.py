"""The scheduling framework: extension points (`points`), profiles (`profile`) and the state
of one cycle (`cycle`). The plugins are in `sam_server.scheduling.plugins`, the built-in
profiles in `sam_server.scheduling.profiles`, the cycle itself in `policy.plan`."""
