"""The ``neuronsim`` command: run scripts on the simulated device, profile them, sweep what-ifs.

One module per subcommand (``cmd_*.py``); traces are read and summarised in ``trace_data``,
preset files in ``presets``, tables and plots in ``formatting``, ``plots`` and ``html_report``.
"""
