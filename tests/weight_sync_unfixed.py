"""rocmkit's CPU platform for verl without its weight-sync fixes (cpu_weight_sync.py): named in
VERL_USE_EXTERNAL_MODULES by tests/weight_sync_run.py --unfixed, to show what the fixes change."""

from rocmkit.verl import cpu_weight_sync

cpu_weight_sync.install = lambda: None
from rocmkit.verl import cpu_platform  # noqa: E402,F401  (registers the platform, as verl imports it)
