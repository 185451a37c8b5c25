"""What rocmkit knows about verl, in one package that certify, tune, `verl-check` and the cluster code import:
the overrides of a smoke run (overrides), verl's own config check run in the Python that has verl
(config_check, with its rules batch_rules and verl_messages), launch scripts run by bash in a sandbox of
recording stand-ins (script_sandbox) and read into the main_ppo commands they run (launch_script), recipe checks
against a target's
verl (recipe_check, history), the actor's attention (attention), vLLM's sleep-mode pool (sleep_pool), and the CPU platform plugin with its weight sync (cpu_platform, cpu_weight_sync,
import_hooks), which verl imports by name in every process of a `--gpus 0` run. What only certify's verl engine
reads (what a run did, its steps in the target) lives with that engine, so nothing here imports certify."""
