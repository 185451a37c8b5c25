"""Where every process of a hung run stood: the stall report (certify's watchdog before it stops a run, and
`rocmkit doctor --stalled PID` for a user's own job). `tree` reads the processes, `stacks` runs py-spy on each,
`waits` names what a stack waits in, `verdict` says who waits for whom, `report` puts it together (pure apart
from `tree`, `stacks` and `report.take`)."""
