"""The run as pytest sees it: the controller and worker roles, items, the self-test plan, the
forecast, the cost cap, shards, the baseline gate and the terminal output.  The only package
that imports pytest's hook machinery besides ``plugin.py``."""
