"""The tests mirror src/agentic_rag/: tests/<package>/ tests that package (tests/app/ the modules
at its root, tests/repository/ the build and deployment files); tests/support/ holds what tests
share; tests/data/ holds recorded inputs. conftest.py's fixtures serve every directory."""
