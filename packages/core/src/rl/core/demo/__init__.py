"""The embedded default: a verifiable arithmetic task generated in code for the tiny model."""
