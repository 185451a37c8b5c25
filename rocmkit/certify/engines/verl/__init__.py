"""certify's verl engine, in its own folder: the engine (engine.py: ENGINE, the class the flow drives), its
`rocmkit certify` flags (cli.py) and their checks (options.py), what it reads from the setup's report and the run's
log for the certificate (report.py), and what only a verl certification uses, on the host and in the target: a
smoke run's overrides and start-up cuts, the attention and SGLang backends chosen, vLLM's sleep-mode pool and build,
the modules main_ppo imports, the packages that break verl. The in-target steps that call them are
rocmkit/certify/intarget/verl_steps.py. Nothing is imported here, so a module of this folder imports without the
host side (the in-target steps import them in the target)."""
