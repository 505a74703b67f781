"""Fuzz suite: hcsim's public API and CLI against random, mutated and hostile input.

See docs/robustness.md. ``make fuzz`` runs the long campaign; ``make test`` runs a fast,
derandomized slice.
"""
