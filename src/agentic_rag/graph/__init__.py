"""The knowledge graph (docs/graph.md): Graphiti's tools as skills, on FalkorDB, per tenant.

Graphiti sends anonymous telemetry unless told not to; nothing of ours may reach the network,
so it is switched off here, before any module of this package imports graphiti_core.
"""

import os

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
