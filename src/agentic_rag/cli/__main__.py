"""`python -m agentic_rag.cli`: what the console script `agentic-rag` runs."""

import sys

from agentic_rag.cli.main import main

sys.exit(main())
