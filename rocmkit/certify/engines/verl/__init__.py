"""certify's verl engine, in its own folder: the engine (engine.py: ENGINE, the class the flow drives), its
`rocmkit certify` flags (cli.py) and their checks (options.py), and what it reads from the setup's report and the
run's log for the certificate (report.py). The in-target steps it runs are in rocmkit/certify/intarget/ (their
package stays light: this one's modules may import the host side). Nothing is imported here, so a module of
this folder imports without the rest."""
