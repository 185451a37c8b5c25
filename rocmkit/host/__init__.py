"""Host and container validation: collect facts once, run pure checks over them, report findings."""
