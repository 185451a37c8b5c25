"""certify's Miles engine (engine.py: ENGINE, the class the flow drives, with its flags): Miles' own short test in
its image. Nothing is imported here."""
