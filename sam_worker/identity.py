"""Who this worker process is (for leases and heartbeats)."""

from __future__ import annotations

import os
import socket
import uuid

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
