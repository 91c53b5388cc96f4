"""The planner's input files: JSON/TOML reading, strict values, mmcli's layer config, ``--map``."""
