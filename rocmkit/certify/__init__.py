"""Smoke GRPO certification: a short run that proves a stack trains, judged, and written down."""
