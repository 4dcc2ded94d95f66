"""Agentic rollouts: tools, their sandbox, tool-call parsing (and, built on them, the
multi-turn agent loop over `RolloutEngine.generate_one`)."""
