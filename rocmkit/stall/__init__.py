"""Where every process of a hung run stood: the stall report (certify's watchdog before it stops a run, and
`rocmkit doctor --stalled PID` for a user's own job). `tree` reads the processes, `stacks` runs py-spy on each,
`waits` names what a stack waits in, `flightrec` reads the job's own record of its collectives (PyTorch's flight
recorder, which `frdump` writes inside each rank), `verdict` says who waits for whom, `report` puts it together
(pure apart from `tree`, `stacks`, `flightrec`'s asking and `report.take`)."""
