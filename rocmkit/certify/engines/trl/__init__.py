"""certify's TRL engine (engine.py: ENGINE, the class the flow drives, with its flags); the code it runs in the
target is rocmkit/certify/intarget/trl_launch.py and trl_run.py. Nothing is imported here."""
