"""This process's identity: who owns the turns it streams.

``PROCESS_ID`` is stored on every message row this process streams (``owner_process``), so a
restart or another process can tell live turns from dead ones. ``identity.channel_name`` is the
process's channel-layer channel in the scaled set-up (empty with the in-memory layer); it is
stored as ``owner_channel`` so other processes can ask for snapshots and send Stop.

Kept apart from the runner and the cluster code so that neither imports the other for it.

May import: the standard library only.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class ProcessIdentity:
    """Mutable holder of this process's channel name (set once the cluster listener starts)."""

    process_id: str = PROCESS_ID
    channel_name: str = ""


identity = ProcessIdentity()
